"""The Kubernetes wing: the probe, its API client, object reading and state mapping."""
