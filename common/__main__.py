"""python -m common schema: print the result JSON Schema (schema/result.schema.json)."""

import json
import sys

from common.result import json_schema

if sys.argv[1:] != ["schema"]:
    print("usage: python -m common schema", file=sys.stderr)
    sys.exit(2)
print(json.dumps(json_schema(), indent=2, sort_keys=True))
