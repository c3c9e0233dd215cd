"""Examples of what the suite takes from you: a workload of your own (custom_workload.py)."""
