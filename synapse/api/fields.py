"""Serializer parts every API uses: strict input, timestamps, durations, single-line names."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions, serializers

from synapse.text import validate_single_line
from synapse.timestamps import format_timestamp, parse_duration, parse_timestamp


@extend_schema_field(OpenApiTypes.DATETIME)
class TimestampField(serializers.Field):
    """Reads RFC 3339 or epoch seconds; writes RFC 3339 UTC."""

    default_error_messages = {"invalid": "{message}"}

    def to_internal_value(self, data):
        try:
            return parse_timestamp(data)
        except (ValueError, OverflowError, OSError) as error:
            self.fail("invalid", message=str(error))

    def to_representation(self, value):
        return format_timestamp(value)


@extend_schema_field(OpenApiTypes.STR)
class DurationField(serializers.Field):
    default_error_messages = {"invalid": "{message}"}

    def to_internal_value(self, data):
        try:
            return parse_duration(data)
        except ValueError as error:
            self.fail("invalid", message=str(error))

    def to_representation(self, value):
        return int(value.total_seconds())


class SingleLineName:
    """A field validator for names and keys: not blank once stripped, and one line
    (synapse.text's rule). ``SingleLineName("key")`` says "The key cannot be blank."."""

    def __init__(self, what: str):
        self.blank_message = f"The {what} cannot be blank."

    def __call__(self, value: str) -> str:
        value = value.strip()
        if not value:
            raise serializers.ValidationError(self.blank_message)
        validate_single_line(value)
        return value


class StrictSerializer(serializers.Serializer):
    """A serializer that refuses fields it does not know, naming them.

    ``forbidden_fields`` are fields a client may never set (server-assigned); they get
    their own message so the client learns why.
    """

    forbidden_fields: frozenset[str] = frozenset()

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise exceptions.ValidationError(
                {"non_field_errors": ["Expected a JSON object."]})
        errors = {}
        for name in data:
            if name in self.forbidden_fields:
                errors[name] = ["This field is set by the server and cannot be written."]
            elif name not in self.fields or self.fields[name].read_only:
                errors[name] = ["Unknown field."]
        if errors:
            raise exceptions.ValidationError(errors)
        return super().to_internal_value(data)
