"""What runs a task: the process runtime (`python -m tasks`, process.py) and the shared one
(a host's long-lived application, shared.py), a task's run and indexer, its chat API, its
sequences and its calls to the overlord."""
