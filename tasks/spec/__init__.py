"""The Druid spec models a task payload carries (dataSchema, ioConfig's inputFormat,
tuningConfig), their ISO-8601 periods and the field errors their validation raises. The
overlord's supervisor spec (supervisor/schemas/spec.py) is built from them."""
