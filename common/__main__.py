"""python -m common schema: print the result JSON Schema (schema/result.schema.json).
python -m common manifest-schema: print the manifest JSON Schema (schema/manifest.schema.json).
python -m common source-digest: print this checkout's source digest (results record it)."""

import json
import sys

from common.errors import EXIT_USAGE

if sys.argv[1:] == ["schema"]:
    from common.result import json_schema

    print(json.dumps(json_schema(), indent=2, sort_keys=True))
elif sys.argv[1:] == ["manifest-schema"]:
    from common.manifest import manifest_json_schema

    print(json.dumps(manifest_json_schema(), indent=2, sort_keys=True))
elif sys.argv[1:] == ["source-digest"]:
    from common.source import source_digest

    print(source_digest())
else:
    print("usage: python -m common schema | manifest-schema | source-digest", file=sys.stderr)
    sys.exit(EXIT_USAGE)
