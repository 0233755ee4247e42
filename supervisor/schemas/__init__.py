"""Pydantic models: the Druid-compatible supervisor spec and the API's request/response shapes."""
