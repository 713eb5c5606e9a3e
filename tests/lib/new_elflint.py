#!/usr/bin/env python3
"""new_elflint.py ORIGINAL EDITED [ORIGINAL EDITED ...]

eu-elflint --gnu-ld's messages on each EDITED file that its ORIGINAL did not draw (numbers
normalized, so renumbered sections do not look new: tests/cross/harness.py). Prints each pair's
new messages, or `clean`; exits 1 if any pair has one. For the client suites (tests/maturin),
whose inputs come from a linker or a distribution that eu-elflint has its own complaints about.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cross"))
import harness  # noqa: E402


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if harness.ELFLINT is None:
        print("new_elflint.py: eu-elflint is required", file=sys.stderr)
        return 2
    status = 0
    for original, edited in zip(argv[::2], argv[1::2]):
        new = harness.new_elflint(harness.elflint_messages(original), harness.elflint_messages(edited))
        print("== %s (against %s): %s" % (edited, original, "clean" if not new else "%d new" % len(new)))
        for line in new:
            print("   " + line)
        status |= bool(new)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
