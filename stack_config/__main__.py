"""`python -m stack_config pulumi-yaml|markdown`: print the generated documents (`make golden` writes them)."""

import sys

from stack_config import docs

what = sys.argv[1] if len(sys.argv) > 1 else ""
if what == "pulumi-yaml":
    sys.stdout.write(docs.pulumi_yaml())
elif what == "markdown":
    sys.stdout.write(docs.markdown_table())
else:
    sys.exit("usage: python -m stack_config pulumi-yaml|markdown (make golden writes them)")
