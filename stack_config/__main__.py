"""`python -m stack_config pulumi-yaml|markdown|sync`: print or rewrite the generated documents."""

import sys

from stack_config import docs

what = sys.argv[1] if len(sys.argv) > 1 else ""
if what == "pulumi-yaml":
    sys.stdout.write(docs.pulumi_yaml())
elif what == "markdown":
    sys.stdout.write(docs.markdown_table())
elif what == "sync":
    docs.sync_files()
else:
    sys.exit("usage: python -m stack_config pulumi-yaml|markdown|sync")
