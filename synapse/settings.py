"""Synapse settings: one file, every value from the environment (see the README's table)."""

import os
import warnings
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

# Strict helpers: a malformed value is refused, never guessed at.

def env_str(name: str, default: str | None = None) -> str | None:
    """A string from NAME, or from the file named by NAME_FILE (for secrets)."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        return Path(file_name).read_text(encoding="utf-8").strip()
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "1", "yes", "on"):
        return True
    if raw.lower() in ("false", "0", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


# Production refuses to start without SECRET_KEY and ALLOWED_HOSTS and turns on every
# transport-security setting that `manage.py check --deploy` asks for.
PRODUCTION = env_bool("SYNAPSE_PRODUCTION", False)
DEBUG = env_bool("DEBUG", False)
if PRODUCTION and DEBUG:
    # Debug pages show settings, SQL and local variables to whoever triggers an error.
    raise ImproperlyConfigured("DEBUG=true is refused with SYNAPSE_PRODUCTION=true: debug "
                               "pages show settings and tracebacks to anyone.")
DATA_DIR = Path(env_str("SYNAPSE_DATA_DIR", str(BASE_DIR / ".synapse"))).resolve()


def _secret_key() -> str:
    configured = env_str("SECRET_KEY")
    if configured:
        return configured
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) must be set in production")
    # Development: a random key kept in the data folder, so sessions survive restarts.
    import secrets

    from synapse.private_files import read_or_create_secret

    return read_or_create_secret(DATA_DIR / "secret_key", lambda: secrets.token_urlsafe(50))


SECRET_KEY = _secret_key()


def _credentials_keys() -> list[str]:
    """Fernet keys for ``credentials`` content, newest first (memories/crypto.py)."""
    import base64
    import binascii

    configured = env_list("SYNAPSE_CREDENTIALS_KEYS", [])
    if os.environ.get("SYNAPSE_CREDENTIALS_KEYS_FILE"):
        configured = [item.strip() for item in
                      env_str("SYNAPSE_CREDENTIALS_KEYS").split(",") if item.strip()]
    if not configured:
        if PRODUCTION:
            raise ImproperlyConfigured(
                "SYNAPSE_CREDENTIALS_KEYS (or SYNAPSE_CREDENTIALS_KEYS_FILE) must be set in "
                "production: comma-separated Fernet keys, newest first.")
        # Development: one key kept in the data folder, like SECRET_KEY.
        from synapse.private_files import read_or_create_secret

        configured = [read_or_create_secret(
            DATA_DIR / "credentials_key",
            lambda: base64.urlsafe_b64encode(os.urandom(32)).decode())]
    for position, key in enumerate(configured, 1):
        try:
            valid = len(base64.urlsafe_b64decode(key.encode())) == 32
        except (binascii.Error, ValueError):
            valid = False
        if not valid:
            raise ImproperlyConfigured(
                f"SYNAPSE_CREDENTIALS_KEYS: key {position} is not a Fernet key (32 url-safe "
                "base64-encoded bytes; make one with `python -c \"from cryptography.fernet "
                "import Fernet; print(Fernet.generate_key().decode())\"`).")
    return configured


CREDENTIALS_KEYS = _credentials_keys()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost",
                                                                   "testserver", "[::1]"])
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must be set in production")
if PRODUCTION and "*" in ALLOWED_HOSTS:
    # Any Host header would be served: the server's own names are what it answers to.
    raise ImproperlyConfigured("ALLOWED_HOSTS=* is refused with SYNAPSE_PRODUCTION=true: list "
                               "the host names this server is reached at "
                               "(synapse.example.com).")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# The origin agents and OAuth clients reach this server at (https://synapse.example.com):
# the resource its OAuth tokens are issued for and the base of every URL it hands out
# (synapse.origin). Unset, each request's own scheme and Host (fine on one host name) —
# except for the links handed to people (password-reset and invitation mail, the invitation
# link), which in production are built on it alone (synapse.origin.link_origin): required
# there with EMAIL_HOST (below).
PUBLIC_URL = (env_str("SYNAPSE_PUBLIC_URL", "") or "").rstrip("/")
if PUBLIC_URL:
    from urllib.parse import urlsplit

    _parts = urlsplit(PUBLIC_URL)
    if _parts.scheme not in ("http", "https") or not _parts.netloc or _parts.path \
            or _parts.query or _parts.fragment:
        raise ImproperlyConfigured(
            f"SYNAPSE_PUBLIC_URL must be an origin such as https://synapse.example.com "
            f"(scheme and host, no path), not {PUBLIC_URL!r}")

INSTALLED_APPS = [
    "synapse.apps.SynapseAdminConfig",  # django.contrib.admin, sign-in rate-limited
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "rest_framework_simplejwt.token_blacklist",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "oauth2_provider",
    "synapse",
    "minds",
    "memories",
]

MIDDLEWARE = [
    # First, so it times everything below (removed from the chain when metrics are off).
    "synapse.middleware.MetricsMiddleware",
    "synapse.middleware.RequestGuardMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "synapse.middleware.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "synapse.urls"
WSGI_APPLICATION = "synapse.wsgi.application"
ASGI_APPLICATION = "synapse.asgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


# How Synapse reaches PostgreSQL: "" (directly) or "pgbouncer" (through PgBouncer in
# transaction pooling mode: no startup ``options``, so the statement timeout is a setting of
# the role, which ``migrate`` stores; docs/scaling.md, "PgBouncer").
POOLERS = ("", "pgbouncer")


def _databases() -> dict:
    # No single statement may run away with the server (milliseconds).
    timeout_ms = env_int("DATABASE_STATEMENT_TIMEOUT_MS", 30000)
    pooler = (env_str("DATABASE_POOLER", "") or "").strip().lower()
    if pooler not in POOLERS:
        raise ImproperlyConfigured(
            f"DATABASE_POOLER must be empty (a direct connection) or pgbouncer (PgBouncer in "
            f"transaction pooling mode), not {pooler!r}")
    options = {"ENGINE": "synapse.db", "CONN_MAX_AGE": env_int("DATABASE_CONN_MAX_AGE", 60),
               "CONN_HEALTH_CHECKS": True, "STATEMENT_TIMEOUT_MS": timeout_ms,
               "POOLER": pooler,
               # PgBouncer refuses a startup ``options`` parameter (and would not keep a
               # session setting anyway): the role carries the timeout there (synapse.db).
               "OPTIONS": {} if pooler else {"options": f"-c statement_timeout={timeout_ms}"}}
    url = env_str("DATABASE_URL")
    if url:
        import dj_database_url

        parsed = dj_database_url.parse(url)
        options.update({key: parsed[key] for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT")})
        return {"default": options, **_replicas(options)}
    if PRODUCTION and not env_bool("SYNAPSE_ALLOW_EMBEDDED_DB", False):
        raise ImproperlyConfigured(
            "DATABASE_URL must be set in production. The embedded PostgreSQL is meant for "
            "development and single-host trials; set SYNAPSE_ALLOW_EMBEDDED_DB=true to run on "
            "it anyway (then back it up with `manage.py backup`).")
    from synapse.embedded_db import Cluster

    options.update(Cluster(DATA_DIR).connection_settings())
    options["EMBEDDED_DATA_DIR"] = str(DATA_DIR)
    return {"default": options, **_replicas(options)}


def _replicas(primary: dict) -> dict:
    """``replica1``, ``replica2``, … from DATABASE_REPLICA_URLS: streaming standbys of the
    primary, configured like it (engine, timeouts), plus a short connect timeout so a
    replica that does not answer costs little (synapse.db_router). Tests use the primary
    in their place (``MIRROR``)."""
    import dj_database_url

    replicas = {}
    for position, url in enumerate(env_list("DATABASE_REPLICA_URLS", []), 1):
        try:
            parsed = dj_database_url.parse(url)
        except ValueError as error:
            raise ImproperlyConfigured(
                f"DATABASE_REPLICA_URLS: URL {position} is not a database URL ({error}).") from None
        replica = {key: value for key, value in primary.items() if key != "EMBEDDED_DATA_DIR"}
        replica.update({key: parsed[key] for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT")})
        replica["OPTIONS"] = {**primary["OPTIONS"],
                              "connect_timeout": env_int("DATABASE_REPLICA_CONNECT_TIMEOUT", 2)}
        replica["TEST"] = {"MIRROR": "default"}
        replicas[f"replica{position}"] = replica
    return replicas


DATABASES = _databases()
# Read replicas (docs/scaling.md, "Read replicas"): with DATABASE_REPLICA_URLS set, the
# memory reads of list, search and recall may go to a standby; everything else, and every
# write, to the primary.
DATABASE_REPLICAS = [alias for alias in DATABASES if alias != "default"]
if DATABASE_REPLICAS:
    DATABASE_ROUTERS = ["synapse.db_router.ReplicaRouter"]
    MIDDLEWARE.append("synapse.middleware.ReadYourWritesMiddleware")
# A replica further behind the primary than this is not read from (milliseconds); its
# state is checked at most once per DATABASE_REPLICA_CHECK_MS in each process.
DATABASE_REPLICA_MAX_LAG_MS = env_int("DATABASE_REPLICA_MAX_LAG_MS", 2000)
DATABASE_REPLICA_CHECK_MS = env_int("DATABASE_REPLICA_CHECK_MS", 1000)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {
    # Shared by every process (the embedding worker's heartbeat): the database, never process
    # memory. Rate limits have their own table (synapse.throttling).
    "default": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "synapse_cache",
        # Django culls a third of the entries past MAX_ENTRIES (default 300); expired
        # entries go first.
        "OPTIONS": {"MAX_ENTRIES": env_int("SYNAPSE_CACHE_MAX_ENTRIES", 50_000)},
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("SYNAPSE_STATIC_ROOT", str(DATA_DIR / "static")))
STATICFILES_DIRS = [BASE_DIR / "synapse" / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
                    if PRODUCTION else "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = not PRODUCTION
if WHITENOISE_USE_FINDERS:
    # Development serves from the finders; STATIC_ROOT exists only after collectstatic
    # (production image), and WhiteNoise would warn about it at every start.
    warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)

LOGIN_URL = "/ui/login"
LOGIN_REDIRECT_URL = "/ui/"
LOGOUT_REDIRECT_URL = "/ui/login"

# Request limits (docs/api.md). The body limit covers JSON bodies; larger ones get a 413.
MAX_BODY_BYTES = env_int("SYNAPSE_MAX_BODY_BYTES", 5 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_BODY_BYTES
# Import and sync read their bodies as they arrive (memory holds one item at a time), so
# these caps bound time, not memory. Import: a whole backup (a 100,000-memory export with
# its versions is 139 MB). Sync: one diff page (default 1000 memories) even at the
# longest content allowed (50,000 characters each, ~51 MB); at most 5000 changes.
IMPORT_MAX_BODY_BYTES = env_int("SYNAPSE_IMPORT_MAX_BODY_BYTES", 512 * 1024 * 1024)
SYNC_MAX_BODY_BYTES = env_int("SYNAPSE_SYNC_MAX_BODY_BYTES", 64 * 1024 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Mind Keys and OAuth access tokens: one agent principal (minds.authentication).
        "minds.authentication.AgentAuthentication",
        "rest_framework_simplejwt.authentication.JWTAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["synapse.parsers.JSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "synapse.negotiation.LenientContentNegotiation",
    "DEFAULT_SCHEMA_CLASS": "synapse.api.schema.RoleAutoSchema",
    "EXCEPTION_HANDLER": "synapse.api.exception_handler",
    # Throttles key on REMOTE_ADDR unless the operator says how many proxies add
    # X-Forwarded-For (a client-supplied header must not choose its own throttle bucket).
    # synapse/gunicorn_conf.py reads the same variable: with 0, uvicorn does not rewrite
    # REMOTE_ADDR from the header either (security finding 9).
    "NUM_PROXIES": env_int("SYNAPSE_NUM_PROXIES", 0),
    "UNAUTHENTICATED_USER": None,
    # Per Mind Key / per user / per client address, by scope (synapse.throttling).
    "DEFAULT_THROTTLE_CLASSES": ["synapse.throttling.ScopeRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "write": env_str("SYNAPSE_RATE_WRITE", "600/min"),
        "search": env_str("SYNAPSE_RATE_SEARCH", "600/min"),
        "semantic": env_str("SYNAPSE_RATE_SEMANTIC", "120/min"),
        # Recall without a budget: the whole mind, streamed.
        "recall": env_str("SYNAPSE_RATE_RECALL", "120/min"),
        "export": env_str("SYNAPSE_RATE_EXPORT", "30/hour"),
        # Each sync may write 5000 changes, each import a whole mind.
        "sync": env_str("SYNAPSE_RATE_SYNC", "60/min"),
        "import": env_str("SYNAPSE_RATE_IMPORT", "10/hour"),
        "login": env_str("SYNAPSE_RATE_LOGIN", "20/min"),
        # Password attempts on one username from one address (synapse.throttling).
        "login_username": env_str("SYNAPSE_RATE_LOGIN_USERNAME", "5/min"),
        # Password-reset e-mails asked for from one address (each sends mail).
        "password_reset": env_str("SYNAPSE_RATE_PASSWORD_RESET", "5/hour"),
        # OAuth client registrations (POST /oauth/register, open to anyone) per address.
        "oauth_register": env_str("SYNAPSE_RATE_OAUTH_REGISTER", "30/hour"),
        # /oauth/token, per client address and per client id (minds.oauth_views.TokenView):
        # a host exchanges a code once and refreshes about once an hour.
        "oauth_token": env_str("SYNAPSE_RATE_OAUTH_TOKEN", "60/min"),
        "oauth_token_client": env_str("SYNAPSE_RATE_OAUTH_TOKEN_CLIENT", "60/min"),
        # Invitations sent by one person (each may send mail; minds.invitations).
        "invite": env_str("SYNAPSE_RATE_INVITE", "30/hour"),
    },
    # `format` is a recall option of ours, not DRF's renderer override.
    "URL_FORMAT_OVERRIDE": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Synapse API",
    "DESCRIPTION": "Memory service for LLM agents. Agents authenticate with a Mind Key "
    "(`Authorization: Bearer mk_…`); humans with a JWT from `/auth/login`.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # Two choice sets share the field name "source": every source, and the ones an agent
    # may claim (never "user").
    "ENUM_NAME_OVERRIDES": {
        "SourceEnum": "memories.models.Source",
        "AgentSourceEnum": ["agent", "tool", "system"],
    },
    # Swagger UI assets are served from the installed package: no CDN, works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# E-mail (password reset): through SMTP when EMAIL_HOST is set, else printed on the
# console in development. In production without EMAIL_HOST nothing is sent: reset links are
# secrets and never go to a log (minds.mail.mail_configured).
EMAIL_HOST = env_str("EMAIL_HOST", "") or ""
if PRODUCTION and EMAIL_HOST and not PUBLIC_URL:
    # A mailed link built on the request's Host would send a reset token wherever a
    # stranger's Host header points.
    raise ImproperlyConfigured(
        "SYNAPSE_PUBLIC_URL must be set in production when EMAIL_HOST is: the links mailed "
        "(password resets, invitations) are built on it, never on the request's Host.")
EMAIL_BACKEND = ("django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST
                 else "django.core.mail.backends.console.EmailBackend")
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "") or ""
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "") or ""
# STARTTLS on the submission port (587), TLS from the start on 465, unless told otherwise.
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", EMAIL_PORT == 587)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", EMAIL_PORT == 465)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL cannot both be true.")
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Synapse <synapse@localhost>")
# How long a password-reset link works (Django's default is three days).
PASSWORD_RESET_TIMEOUT = env_int("PASSWORD_RESET_TIMEOUT", 3600)

SIMPLE_JWT = {
    "ACCESS_TOKEN_LIFETIME": timedelta(minutes=env_int("JWT_ACCESS_MINUTES", 15)),
    "REFRESH_TOKEN_LIFETIME": timedelta(days=env_int("JWT_REFRESH_DAYS", 7)),
    "ROTATE_REFRESH_TOKENS": True,
    "BLACKLIST_AFTER_ROTATION": True,
    "SIGNING_KEY": env_str("JWT_SIGNING_KEY") or SECRET_KEY,
    "ALGORITHM": "HS256",
    "AUTH_HEADER_TYPES": ("Bearer",),
    "UPDATE_LAST_LOGIN": True,
    # Tokens carry a digest of the password hash: a password change ends every access
    # token (simplejwt) and every refresh token (minds.api.serializers.RefreshSerializer).
    "CHECK_REVOKE_TOKEN": True,
}
if PRODUCTION and not env_str("JWT_SIGNING_KEY"):
    raise ImproperlyConfigured(
        "JWT_SIGNING_KEY (or JWT_SIGNING_KEY_FILE) must be set in production")

# OAuth 2.1 for MCP hosts (docs/security.md, "OAuth"): django-oauth-toolkit issues the
# tokens; Synapse adds the consent page, client registration and the metadata documents
# (minds.oauth). Authorization code with PKCE S256 only; access tokens short-lived,
# refresh tokens rotate, and a refresh token used twice ends its whole family.
OAUTH_SCOPES = {"memory:read": "Read this mind's memories (recall, search, list)",
                "memory:write": "Store, change and forget memories (and read them)"}
# DOT's own models, not swapped (named so migrations can depend on them).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_GRANT_MODEL = "oauth2_provider.Grant"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"  # noqa: S105 (a model)
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth2_provider.RefreshToken"  # noqa: S105 (a model)
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"  # noqa: S105 (a model)
OAUTH2_PROVIDER = {
    "SCOPES": OAUTH_SCOPES,
    "DEFAULT_SCOPES": ["memory:read"],
    "READ_SCOPE": "memory:read",
    "WRITE_SCOPE": "memory:write",
    "ACCESS_TOKEN_EXPIRE_SECONDS": env_int("SYNAPSE_OAUTH_ACCESS_TOKEN_SECONDS", 3600),
    # A refresh token dies this long after its last access token expired.
    "REFRESH_TOKEN_EXPIRE_SECONDS": env_int("SYNAPSE_OAUTH_REFRESH_TOKEN_SECONDS",
                                            30 * 24 * 3600),
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": env_int("SYNAPSE_OAUTH_CODE_SECONDS", 60),
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "PKCE_REQUIRED": True,
    # https only in DOT's own checks; Synapse allows http to loopback addresses besides
    # (RFC 8252 native clients: registration and the consent view, minds.oauth), on any
    # port (ALLOW_LOCALHOST_LOOPBACK).
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https"],
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "REQUEST_APPROVAL_PROMPT": "force",
    "OAUTH2_VALIDATOR_CLASS": "minds.oauth.SynapseOAuth2Validator",
    # The authorization-code and refresh-token grants only (oauthlib's default Server
    # carries the password and client-credentials grants too, and its password grant checks
    # the password before it refuses the client: a password oracle without sign-in limits).
    "OAUTH2_SERVER_CLASS": "oauthlib.oauth2.WebApplicationServer",
    # RFC 9700 (OAuth 2.0 Security BCP), all enforced: no implicit or password grant, no
    # "plain" PKCE, no token in a query string, tokens stored hashed, ``iss`` sent.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    # RFC 9207 ``iss`` in authorization responses (the consent view sets the public origin).
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
}

# Synapse behaviour
SYNAPSE = {
    "EMBEDDING_MODEL": env_str("SYNAPSE_EMBEDDING_MODEL", "all-MiniLM-L6-v2"),
    "EMBEDDING_DIM": env_int("SYNAPSE_EMBEDDING_DIM", 384),
    "EMBED_BATCH_SIZE": env_int("SYNAPSE_EMBED_BATCH_SIZE", 64),
    # What embeds search questions (memories.embeddings.query_encoder_name): "int8" (the
    # bundled model's int8 ONNX copy, the default with the bundled model) or "model".
    "QUERY_ENCODER": env_str("SYNAPSE_QUERY_ENCODER", ""),
    # The embedding worker (manage.py embed_worker; docs/scaling.md, "The embedding worker"):
    # memories claimed per transaction, torch threads, niceness, and how often it looks for
    # memories embedded by another model.
    "EMBED_CLAIM_SIZE": env_int("SYNAPSE_EMBED_CLAIM_SIZE", 256),
    "EMBED_THREADS": env_int("SYNAPSE_EMBED_THREADS", max(1, (os.cpu_count() or 2) // 2)),
    "EMBED_NICE": env_int("SYNAPSE_EMBED_NICE", 10),
    "EMBED_SWEEP_SECONDS": env_int("SYNAPSE_EMBED_SWEEP_SECONDS", 3600),
    # gunicorn loads the query encoder (and the model, when it encodes the questions) in
    # its master before forking the web workers (synapse/gunicorn_conf.py).
    "PRELOAD_MODEL": env_bool("SYNAPSE_PRELOAD_MODEL", True),
    # Closed by default in production: anyone who reaches the server could open accounts.
    "ALLOW_REGISTRATION": env_bool("SYNAPSE_ALLOW_REGISTRATION", not PRODUCTION),
    # How long an invitation's link works (minds.invitations); inviting again renews it.
    "INVITATION_DAYS": env_int("SYNAPSE_INVITATION_DAYS", 7),
    "TRASH_RETENTION_DAYS": env_int("SYNAPSE_TRASH_RETENTION_DAYS", 30),
    "IDEMPOTENCY_TTL_SECONDS": env_int("SYNAPSE_IDEMPOTENCY_TTL_SECONDS", 24 * 3600),
    "KEY_LAST_USED_RESOLUTION_SECONDS": 60,
    # A memory created with memory_type=working and no expiry expires after this long.
    "WORKING_MEMORY_TTL_SECONDS": env_int("SYNAPSE_WORKING_MEMORY_TTL_SECONDS", 24 * 3600),
    # Per-mind quotas (memories.quotas): a write that would go over one is refused with a
    # 403 quota_exceeded. Memories count the trash until it is purged; versions are never
    # pruned; content bytes are the stored bytes of every version's content.
    "QUOTA_MEMORIES": env_int("SYNAPSE_QUOTA_MEMORIES", 1_000_000),
    "QUOTA_VERSIONS": env_int("SYNAPSE_QUOTA_VERSIONS", 10_000_000),
    "QUOTA_CONTENT_BYTES": env_int("SYNAPSE_QUOTA_CONTENT_BYTES", 4 * 1024**3),
    # Threads per process for a read run beside the request's own (synapse.db.beside:
    # hybrid search's semantic side, with its question's embedding, while the keyword side
    # runs); each keeps a database connection. As many as the request threads by default;
    # 0 runs both sides one after the other.
    "PARALLEL_READS": env_int("SYNAPSE_PARALLEL_READS",
                              env_int("SYNAPSE_THREADS", 4)),
}

# Transport security. Production values make `manage.py check --deploy` clean.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "no-referrer"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
if PRODUCTION:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_REDIRECT_EXEMPT = [r"^memory/health$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    # The preload directive only signals consent; nothing is preloaded until the operator
    # submits the domain to the browsers' list.
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)

# Prometheus metrics at GET /metrics (docs/scaling.md, "Metrics"): off unless a token is set;
# the scraper sends it as ``Authorization: Bearer <token>``. Every process writes its
# counters to PROMETHEUS_MULTIPROC_DIR when that is set (prometheus-client reads it itself).
METRICS_TOKEN = env_str("SYNAPSE_METRICS_TOKEN", "") or ""
if METRICS_TOKEN and len(METRICS_TOKEN) < 32:
    raise ImproperlyConfigured(
        "SYNAPSE_METRICS_TOKEN must be at least 32 characters (make one with `python -c "
        "\"import secrets; print(secrets.token_urlsafe(32))\"`), or unset to turn metrics off.")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact_secrets": {"()": "synapse.logging.RedactSecretsFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain",
                    "filters": ["redact_secrets"]},
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # httpx logs every URL it requests, query string included (the /mcp tools call the
        # API in-process with it); the MCP SDK logs each stateless request at INFO.
        "httpx": {"level": "WARNING"},
        "mcp": {"level": "WARNING"},
        # runserver's request lines carry the query string: send them through the filter.
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "gunicorn.access": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "gunicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # uvicorn's request lines carry the query string; synapse.asgi logs each request
        # to "synapse.access" with the path only.
        "uvicorn.access": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}
