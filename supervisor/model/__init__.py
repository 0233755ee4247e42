"""Frozen data the overlord reasons about, shared by the controller (which observes and plans
over it) and the services (whose status reports read it)."""
