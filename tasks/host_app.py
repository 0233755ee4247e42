"""`python -m tasks.host_app`: the entry point of a task host's long-lived Spark application
(tasks/runtime/shared.py), under the name operators see in their process lists."""

import sys

from tasks.runtime.shared import main

if __name__ == "__main__":
    sys.exit(main())
