"""Stand-in for temporalio.activity."""

heartbeats = []


def defn(fn):
    return fn


def heartbeat(*details):
    heartbeats.append(details)
