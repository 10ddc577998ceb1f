"""The memory filters (django-filter) of the API's lists and searches and the UI's browser."""

import django_filters

from memories.models import Category, Memory, MemoryType, Priority, Source


class MemoryFilter(django_filters.FilterSet):
    """Applied to already validated values (the API action's query through
    synapse.api.QueryFilterBackend, the browser's form): the filters given apply, the
    others are skipped."""

    # The values were checked before (query serializer or form), so they go straight to the
    # filters: django-filter's own pass through a Django form cost ~1 ms a request (0.4 ms
    # without it; the chain of filter() calls alone 0.1 ms).
    def __init__(self, data=None, queryset=None, *, request=None, prefix=None):
        # django-filter deep-copies every declared filter for each instance, to bind the
        # copies to it and to its form: ~450 deepcopy calls, 0.3 ms of a list request. No
        # form is built here and the filters are only read, so the class's own are shared;
        # a filter given as a method calls this instance's method (filter_queryset).
        self.is_bound = data is not None
        self.data = data or {}
        self.queryset = self._meta.model._default_manager.all() if queryset is None else queryset
        self.request = request
        self.form_prefix = prefix
        self.filters = self.base_filters

    @property
    def qs(self):
        return self.filter_queryset(self.queryset.all())

    def filter_queryset(self, queryset):
        for name, value in self.data.items():
            filter_ = self.filters.get(name)
            if filter_ is None or value in (None, ""):
                continue
            if filter_.method:
                queryset = getattr(self, filter_.method)(queryset, filter_.field_name, value)
            else:
                queryset = filter_.filter(queryset, value)
        return queryset

    category = django_filters.ChoiceFilter(choices=Category.choices)
    priority = django_filters.ChoiceFilter(choices=Priority.choices)
    source = django_filters.ChoiceFilter(choices=Source.choices)
    memory_type = django_filters.ChoiceFilter(choices=MemoryType.choices)
    path = django_filters.CharFilter(method="filter_path")
    tag = django_filters.CharFilter(method="filter_tag")
    verified = django_filters.BooleanFilter()
    updated_since = django_filters.DateTimeFilter(field_name="updated_at", lookup_expr="gte")
    include_expired = django_filters.BooleanFilter(method="filter_include_expired")
    ordering = django_filters.CharFilter(method="filter_ordering")

    class Meta:
        model = Memory
        fields = ["category", "memory_type", "path", "priority", "source", "tag", "verified",
                  "updated_since"]

    def filter_path(self, memories, name, path):
        return memories.under(path)

    def filter_tag(self, memories, name, tag):
        return memories.tagged(tag)

    def filter_include_expired(self, memories, name, include):
        return memories if include else memories.unexpired()

    def filter_ordering(self, memories, name, ordering):
        if ordering.lstrip("-") == "priority":
            # "priority" means most important first; "-priority" least important first.
            field = "-priority_rank" if ordering.startswith("-") else "priority_rank"
            return memories.order_by(field, "-updated_at", "id")
        return memories.order_by(ordering, "id")
