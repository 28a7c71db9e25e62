"""Benchmarks of sbdelta next to raw Delta, a Delta streaming consumer and RabbitMQ (issue 5).

``bash bench/run [--mode tiny|quick|full] [--only send,latency]`` sets up and runs it;
``python -m bench`` runs the harness in a prepared ``.venv``. See docs/benchmarks.md.
Nothing here is imported by the library or by the test suite (except the smoke test).
"""
