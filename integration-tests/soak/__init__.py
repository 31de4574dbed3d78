"""The consumer-group soak (issue 4): see soak/run.py."""
