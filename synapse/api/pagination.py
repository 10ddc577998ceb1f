"""The one pagination of the API: `limit` and `offset` in; `count`, `limit`, `offset` out."""

from rest_framework import serializers


class PageQuery(serializers.Serializer):
    """``limit`` and ``offset``, as every paginated list takes them."""

    limit = serializers.IntegerField(min_value=1, max_value=500, default=50)
    offset = serializers.IntegerField(min_value=0, max_value=10_000_000, default=0)


# What every page answers besides its rows (the schema; page_of gives the values). A comment,
# not a docstring: drf-spectacular would show a docstring as each page's description.
class PageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()


def page_of(queryset, query: dict) -> tuple[list, dict]:
    """One page of an ordered ``queryset`` and the ``count``, ``limit`` and ``offset`` that
    go with it in the response (the count is only queried when the page is full)."""
    limit, offset = query["limit"], query["offset"]
    rows = list(queryset[offset:offset + limit])
    count = queryset.count() if len(rows) == limit or offset else offset + len(rows)
    return rows, {"count": count, "limit": limit, "offset": offset}
