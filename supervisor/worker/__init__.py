"""A task host (`sluicegate worker`, Druid's MiddleManager): registers with the overlords
through their API, heartbeats, runs the tasks the leader assigns it as local processes (the
same runner the overlord uses on its own host) and answers for them on its own API."""
