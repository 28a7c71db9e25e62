"""``python -m bench --mode quick [--only send,latency] [--out bench/results] [--no-rabbitmq]``."""

import sys

from .harness import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
