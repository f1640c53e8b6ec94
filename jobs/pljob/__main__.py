"""The command line of pljob, for scripts and tests:

    python3 jobs/pljob newest-checkpoint DIR   print the newest complete checkpoint
    python3 jobs/pljob verify-checkpoint DIR   exit 0 when complete, else say why
    PYTHON jobs/pljob stack [--json]           the ML stack of PYTHON, one line
                                               (or pljob.this_stack() as JSON)
"""

import os
import sys

if __package__ in (None, ""):
    # Run as `python3 jobs/pljob`: the package's own directory is first on
    # the path, where its module names would shadow others; import the
    # package from jobs/ instead.
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.path.insert(0, os.path.dirname(_HERE))

from pljob.files import newest_complete_checkpoint, verify_checkpoint  # noqa: E402
from pljob.stack import describe_stack, this_stack  # noqa: E402


def _main(argv):
    if len(argv) == 2 and argv[0] == "newest-checkpoint":
        p = newest_complete_checkpoint(argv[1], log=lambda m: print(m, file=sys.stderr))
        if p is None:
            return 1
        print(p)
        return 0
    if len(argv) == 2 and argv[0] == "verify-checkpoint":
        why = verify_checkpoint(argv[1])
        if why:
            print("%s: %s" % (argv[1], why), file=sys.stderr)
            return 1
        return 0
    if argv in (["stack"], ["stack", "--json"]):
        import json
        st = this_stack()
        print(json.dumps(st, sort_keys=True) if len(argv) == 2 else describe_stack(st))
        return 0
    print("usage: pljob newest-checkpoint DIR | verify-checkpoint DIR | stack [--json]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
