"""python -m common schema: print the result JSON Schema (schema/result.schema.json).
python -m common manifest-schema: print the manifest JSON Schema (schema/manifest.schema.json).
python -m common source-digest [TREE]: print the source digest of TREE (default: the checkout
this `common` was imported from) and the tree's path, `DIGEST  PATH`, as sha256sum does."""

import json
import sys
from pathlib import Path

from common.errors import EXIT_USAGE, one_line

if sys.argv[1:] == ["schema"]:
    from common.result import Result

    print(json.dumps(Result.model_json_schema(), indent=2, sort_keys=True))
elif sys.argv[1:] == ["manifest-schema"]:
    from common.manifest import Manifest

    print(json.dumps(Manifest.model_json_schema(), indent=2, sort_keys=True))
elif sys.argv[1:2] == ["source-digest"] and len(sys.argv) <= 3:
    from common.source import SOURCE_PACKAGES, SUITE_ROOT, source_digest

    tree = Path(sys.argv[2]).resolve() if len(sys.argv) == 3 else SUITE_ROOT
    if not all((tree / package).is_dir() for package in SOURCE_PACKAGES):
        needs = ", ".join(p + "/" for p in SOURCE_PACKAGES)
        print(
            f"python -m common: error: {one_line(str(tree))} is not a checkout of this suite"
            f" (it needs {needs})",
            file=sys.stderr,
        )
        sys.exit(EXIT_USAGE)
    print(f"{source_digest(tree)}  {one_line(str(tree))}")
else:
    print(
        "usage: python -m common schema | manifest-schema | source-digest [TREE]", file=sys.stderr
    )
    sys.exit(EXIT_USAGE)
