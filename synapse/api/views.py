"""Base views: strict query parameters and the request's mind, for APIViews and viewsets."""

from collections.abc import Callable

from django.conf import settings
from django.db.models import QuerySet
from django.utils.functional import cached_property
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.extensions import OpenApiFilterExtension
from rest_framework import exceptions, serializers
from rest_framework.metadata import SimpleMetadata
from rest_framework.permissions import SAFE_METHODS
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from minds.access import Action, check, member_mind
from minds.authentication import is_agent
from minds.models import Mind
from synapse.api.permissions import MindAccess
from synapse.provenance import InvalidProvenance, Provenance, provenance_from_headers

# Accepted on every route: how the caller authenticates or picks a mind.
AUTH_PARAMS = frozenset({"key", "mind"})


def validated_query(request, serializer_class: type[serializers.Serializer] | None) -> dict:
    """The query parameters of ``request`` as ``serializer_class`` validates them; a
    parameter it does not declare (besides AUTH_PARAMS) is a 400 naming it."""
    # One instance: each deep-copies its declared fields, the larger part of the work.
    serializer = serializer_class() if serializer_class is not None else None
    fields = serializer.fields if serializer is not None else {}
    unknown = sorted(set(request.query_params) - AUTH_PARAMS - set(fields))
    if unknown:
        raise exceptions.ValidationError(
            {name: ["Unknown query parameter."] for name in unknown})
    if serializer is None:
        return {}
    # What Serializer(data=...) sets; the fields above had to be seen first (lists).
    serializer.initial_data = {
        name: request.query_params.getlist(name)
        if isinstance(fields[name], serializers.ListField) else request.query_params.get(name)
        for name in request.query_params if name not in AUTH_PARAMS}
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def mind_action(view, method: str) -> Action | None:
    """What an operation does to the mind it acts on (minds.access), as its view declares
    it: the view's ``mind_action`` (an ``@action`` keyword, a class attribute, or a dict by
    viewset action where an action may name no mind); on a view that ``acts_on_mind``
    without a declaration, reading for GET/HEAD/OPTIONS and writing for anything else.
    None: the operation acts on no mind (accounts, the list of one's minds). The check
    (``request_mind``, ``member_mind``) and the OpenAPI role line (synapse.api.schema)
    both read it here."""
    declared = getattr(view, "mind_action", None)
    if isinstance(declared, dict):
        return declared.get(getattr(view, "action", None))
    if declared is not None:
        return declared
    if getattr(view, "acts_on_mind", False):
        return Action.READ if method in SAFE_METHODS else Action.WRITE
    return None


def request_mind(request, *, action: Action,
                 implied: Callable[[QuerySet], Mind] | None = None) -> Mind:
    """The mind a request acts on: a Mind Key's own (naming another is a 404), or the
    one a human names with ``?mind=`` among the minds they are a member of, if their role
    allows ``action`` (403 otherwise; minds.access). ``implied``, when given, answers a
    human who names none: called with their minds, it returns the one the request implies
    (e.g. that of the memory in the path) or raises NotFound."""
    principal = request.user
    if is_agent(principal):
        mind_param = request.query_params.get("mind")
        if mind_param and mind_param != principal.mind.id:
            raise exceptions.NotFound("No such mind.")
        return principal.mind
    mind_id = request.query_params.get("mind")
    if not mind_id and implied is not None:
        return check(implied(Mind.objects.of_member(principal)), action)
    if not mind_id:
        raise exceptions.ValidationError(
            {"mind": ["Humans must name the mind to act on: ?mind=<mind_id>."]})
    return member_mind(principal, mind_id, action)


def request_provenance(request) -> Provenance:
    """What the request claims about its agent (synapse.provenance): a 400 naming the
    header when one is malformed."""
    try:
        return provenance_from_headers(request.headers)
    except InvalidProvenance as error:
        raise exceptions.ValidationError({error.header: [error.message]}) from None


class SynapseAPIView(APIView):
    """Base view: authenticated, strict query parameters, and the mind of the request.

    ``query_serializer`` (per view, or per method in ``query_serializers``) declares the
    query parameters; anything else is a 400 naming it.
    """

    permission_classes = [MindAccess]
    # Whether the view acts on a mind (``get_mind``): see ``mind_action``.
    acts_on_mind = False
    mind_action: Action | dict[str, Action] | None = None
    # Rate-limit scope (synapse.throttling): "search", "export", … or a dict by HTTP method;
    # None means writes count as "write" and reads are not limited.
    throttle_scope: str | dict[str, str] | None = None
    query_serializer: type[serializers.Serializer] | None = None
    query_serializers: dict[str, type[serializers.Serializer]] = {}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # HEAD is a GET without the body (Django answers it with the GET handler).
        method = "GET" if request.method == "HEAD" else request.method
        self.query = validated_query(request,
                                     self.query_serializers.get(method, self.query_serializer))

    def get_mind(self) -> Mind:
        """The mind this request acts on: the key's, or the human's ``?mind=`` (a view
        that uses it sets ``acts_on_mind``, so its OpenAPI description names the role)."""
        if not hasattr(self, "_mind"):
            action = mind_action(self, self.request.method)
            if action is None:
                action = Action.READ if self.request.method in SAFE_METHODS else Action.WRITE
            self._mind = request_mind(self.request, action=action)
        return self._mind


class QueryFilterBackend(DjangoFilterBackend):
    """django-filter's backend fed the validated query (``view.query``) rather than the raw
    parameters: the strict query serializer stays the one place that checks them (same
    messages, unknown names refused), the view's FilterSet does the filtering."""

    def get_filterset_kwargs(self, request, queryset, view):
        return {"data": view.query, "queryset": queryset, "request": request}

    def filter_queryset(self, request, queryset, view):
        filterset = self.get_filterset(request, queryset, view)
        return queryset if filterset is None else filterset.qs


class QueryFilterBackendSchema(OpenApiFilterExtension):
    """The parameters are documented by each action's query serializer (in its
    ``@extend_schema``), not again from the FilterSet."""

    target_class = QueryFilterBackend
    priority = 1  # above drf-spectacular's own extension for django-filter's backend

    def get_schema_operation_parameters(self, auto_schema, *args, **kwargs):
        return []


class ViewMetadata(SimpleMetadata):
    """OPTIONS: name, description, media types; no form of fields (the OpenAPI schema has
    them, and these viewsets have no default serializer to describe)."""

    def determine_actions(self, request, view):
        return {}


class MindScopedViewSet(GenericViewSet):
    """A viewset over the rows of the request's mind: authenticated, strict query
    parameters, the mind resolved once from the credentials (``self.mind``).

    Each ``@action`` may set, as keyword arguments: ``permission_classes``,
    ``throttle_scope`` (synapse.throttling reads it), ``query_serializer`` (the query
    parameters it takes), ``parser_classes``, ``body_limit`` (the settings name of the
    body cap a streaming parser reads) and ``mind_from_object``. A standard action (list,
    create…) names its query serializer in ``get_query_serializer_class``.
    """

    permission_classes = [MindAccess]
    throttle_scope: str | None = None
    query_serializer: type[serializers.Serializer] | None = None
    # A detail action may let a human leave out ?mind=: the mind is then the object's,
    # among the minds they own (``implied_mind``).
    mind_from_object = False
    # What the action does to the mind (minds.access.Action), when the method does not say
    # it (synapse.api.views.mind_action): e.g. a scope reset is ``manage``.
    mind_action: Action | None = None
    acts_on_mind = True
    body_limit = "MAX_BODY_BYTES"
    filter_backends = [QueryFilterBackend]
    metadata_class = ViewMetadata

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.query  # noqa: B018 - validated now at the latest, before the handler runs
        if request.method not in SAFE_METHODS:
            self.provenance  # noqa: B018 - a malformed claim is refused before any write
        # Who may act on the mind is settled before the body is read: a non-member gets
        # the 404 and a refused role the 403 whatever they sent (minds.access).
        self.mind  # noqa: B018

    @cached_property
    def provenance(self) -> Provenance:
        """What the request claims about its agent (X-Synapse-Agent, -Agent-Instance,
        -Device), for the services to record on what it writes; never used to decide."""
        return request_provenance(self.request)

    @cached_property
    def query(self) -> dict:
        """The validated query parameters (a permission may read them before the handler)."""
        return validated_query(self.request, self.get_query_serializer_class())

    def get_query_serializer_class(self) -> type[serializers.Serializer] | None:
        return self.query_serializer

    @cached_property
    def mind(self) -> Mind:
        """The mind this request acts on: the key's, or the human's ``?mind=`` (on an
        action with ``mind_from_object``, without it: the mind of the object)."""
        return request_mind(self.request, action=mind_action(self, self.request.method),
                            implied=self.implied_mind if self.mind_from_object else None)

    def implied_mind(self, owned: QuerySet) -> Mind:
        """The mind of the object in the path, among ``owned`` (a human's minds, each with
        their ``role``); a
        NotFound when it is none of theirs. Viewsets with ``mind_from_object`` actions
        implement it."""
        raise NotImplementedError

    def max_body_bytes(self) -> int:
        """The body cap of this action (synapse.parsers.StreamingJSONParser reads it)."""
        return getattr(settings, self.body_limit)

    @classmethod
    def route(cls, method: str, action: str, handler: str | None = None):
        """The view of ``action`` for an extra (compatibility) path, with the action's own
        permissions, throttle scope and query parameters; ``handler`` is a method that
        documents the path under another operation id and answers as ``action`` does."""
        return cls.as_view({method: handler or action}, **getattr(cls, action).kwargs)
