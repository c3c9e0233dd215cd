"""python -m common schema: print the result JSON Schema (schema/result.schema.json).
python -m common source-digest: print this checkout's source digest (results record it)."""

import json
import sys

from common.result import json_schema
from common.source import source_digest

if sys.argv[1:] == ["schema"]:
    print(json.dumps(json_schema(), indent=2, sort_keys=True))
elif sys.argv[1:] == ["source-digest"]:
    print(source_digest())
else:
    print("usage: python -m common schema | source-digest", file=sys.stderr)
    sys.exit(2)
