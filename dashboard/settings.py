"""Frontier settings.

Two ways to run, chosen by the environment alone (docs/configuration.md):
- embedded (default, no variables): SQLite in WAL mode, an in-process channel
  layer and a Celery worker inside the server process with an in-memory broker;
- distributed: DATABASE_URL (PostgreSQL) and REDIS_URL (Celery broker and
  channels-redis) make every process share state through the services.
"""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from servestatic.compress import Compressor

from dashboard.env import (
    database_from_url,
    env_bool,
    env_int,
    env_list,
    env_str,
    proxy_ssl_header,
    redis_url,
)
from dashboard.lib.site_files import STATIC_DIR, TEMPLATES_DIR, default_data_dir

BASE_DIR = Path(__file__).resolve().parent.parent
# A checkout's var/, or (installed from a wheel) the user's data directory.
DATA_DIR = Path(env_str("FRONTIER_DATA_DIR", "") or default_data_dir())

DATABASE_URL = env_str("DATABASE_URL")
REDIS_URL = env_str("REDIS_URL")
# Embedded mode (no services configured) is the local, single-process setup:
# DEBUG defaults on there and off as soon as services are configured.
EMBEDDED = not REDIS_URL
DEBUG = env_bool("DEBUG", not (DATABASE_URL or REDIS_URL))
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off (or set DEBUG=1 for local development)"
        )
    SECRET_KEY = "insecure-dev-key-only-for-debug"  # noqa: S105 - DEBUG only

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "dashboard.apps.FrontierStaticFilesConfig",  # django.contrib.staticfiles
    "channels",
    # Serves Swagger UI's assets from the package (no CDN: /api/docs works offline).
    "ninja",
    "dashboard",
    "verifiers_app",
    "optimizer.tasksets",
    "optimizer",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "dashboard.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "dashboard.middleware.ApiShapeMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "dashboard.middleware.FrontierLoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "dashboard.middleware.FriendlyErrorPagesMiddleware",
]
# Our 403 page for a failed CSRF check too (Django's explains CSRF to developers).
CSRF_FAILURE_VIEW = "dashboard.middleware.csrf_failure"

ROOT_URLCONF = "dashboard.urls"
ASGI_APPLICATION = "dashboard.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [TEMPLATES_DIR],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

# --- Database -----------------------------------------------------------------
if DATABASE_URL:
    DATABASES = {"default": database_from_url("DATABASE_URL", DATABASE_URL)}
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env_str("SQLITE_PATH", str(DATA_DIR / "frontier.sqlite3")),
            # WAL lets the embedded worker thread write while web requests read;
            # IMMEDIATE transactions plus a busy timeout make writers queue
            # instead of failing with "database is locked".
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels and Celery -----------------------------------------------------------
# A prefix keeps several Frontier installations (or test runs) apart on one Redis.
CHANNEL_PREFIX = env_str("FRONTIER_CHANNEL_PREFIX", "frontier")
CHANNEL_REDIS_SOCKET_TIMEOUT = 30  # seconds; > channels-redis's brpop_timeout (5 s)
if REDIS_URL:
    from redis.asyncio.retry import Retry as AsyncRedisRetry
    from redis.backoff import ExponentialBackoff

    redis_url("REDIS_URL", REDIS_URL)
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 reads with a 5 s socket_timeout by default, the same
                # 5 s channels-redis blocks in BRPOP waiting for a message: an idle
                # socket's read timed out and the connection closed (1011) every
                # ~5 s. The read timeout must outlast the BRPOP. A pooled
                # connection Redis dropped (a restart) is retried on a new one
                # instead of failing the next websocket connect with a 500.
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": CHANNEL_REDIS_SOCKET_TIMEOUT,
                        "socket_connect_timeout": 5,
                        "retry": AsyncRedisRetry(ExponentialBackoff(cap=2, base=0.1), 3),
                    }
                ],
                "prefix": CHANNEL_PREFIX,
                "capacity": 1000,
                "expiry": 60,
            },
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    # Shared by every web process: the login throttle's counts (dashboard.throttle).
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": CHANNEL_PREFIX,
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "dashboard.channel_layer.ThreadSafeInMemoryChannelLayer"}
    }
    CELERY_BROKER_URL = (
        "memory://localhost/"  # a host name keeps kombu from warning on every connection
    )

CELERY_TASK_DEFAULT_QUEUE = env_str("FRONTIER_QUEUE", "frontier")
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# No ack emulation on Redis. With it, a worker that loses Redis while a run is
# in flight (celery/kombu 5.7) restores the unacknowledged message through a
# connection it has just closed, gets "'NoneType' object has no attribute
# 'hostname'", and shuts down for good. The database is what keeps runs safe
# instead: a run whose worker died is re-queued by the watchdog once its
# heartbeat is stale, and a queued run that never started is sent again
# (optimizer/celery_tasks.py), so a message the broker forgets costs nothing.
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"ack_emulation": False}
# Put before every Redis key and channel name Celery uses, so that processes
# sharing one Redis DB keep all of their Celery keys apart (FRONTIER_QUEUE keeps
# only the queue apart; the workers' control and event bindings, and the
# deadlines kombu keeps for them, are named by exchange). Empty by default;
# every web process and worker of one installation must give the same value.
BROKER_KEY_PREFIX = env_str("FRONTIER_BROKER_KEY_PREFIX", "")
if BROKER_KEY_PREFIX:
    CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = BROKER_KEY_PREFIX
# Keep reconnecting to a broker that went away, for as long as it takes.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A run in flight when Redis goes away keeps running (it needs only the database);
# cancelling it would throw away the iteration for nothing.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# The embedded worker starts inside `manage.py serve` unless this is off.
EMBEDDED_WORKER = EMBEDDED and env_bool("FRONTIER_EMBEDDED_WORKER", True)
# Check every published run event's payload against its model (optimizer.runs.event_types)
# and raise on a mismatch. On in the tests; off by default (the models are the
# contract, the recorder's hot path need not pay for re-checking it).
FRONTIER_VALIDATE_EVENTS = env_bool("FRONTIER_VALIDATE_EVENTS", False)
EMBEDDED_WORKER_CONCURRENCY = env_int("FRONTIER_WORKER_CONCURRENCY", 2)
# A prefork child of `celery worker` runs each optimization on one CPU, the least
# busy one no other run on this machine holds (optimizer.celery_tasks.on_one_cpu):
# a run's threads share one interpreter lock, which changes hands faster within
# one core (docs/deployment.md). Off: the kernel places them.
FRONTIER_WORKER_PIN_CPUS = env_bool("FRONTIER_WORKER_PIN_CPUS", True)

# A running run whose worker has not beaten its heartbeat for this long is
# considered orphaned (its worker died) and is resumed by another worker.
RUN_STALE_SECONDS = env_int("FRONTIER_RUN_STALE_SECONDS", 30)
# A queued run is kept in the database and sent to the broker after its launch
# commits; a worker's watchdog (every RUN_STALE_SECONDS / 2) sends it again if the
# broker was down then, or if it was sent this long ago and has not started.
RUN_QUEUED_RESEND_SECONDS = env_int("FRONTIER_RUN_QUEUED_RESEND_SECONDS", 600)
# How often, at most, a run's engine reads what its users asked of it (stop, pause,
# injected candidates) between two iterations: a read is a database round trip,
# as long as a whole iteration with a fast local model. 0: before every iteration.
FRONTIER_STEERING_CHECK_MS = env_int("FRONTIER_STEERING_CHECK_MS", 200)

# Per-user run limits (site defaults; an admin sets other values per user in
# "User run limits"). Checked at launch, fork and resume (optimizer/runs/limits.py).
FRONTIER_MAX_METRIC_CALLS_PER_RUN = env_int("FRONTIER_MAX_METRIC_CALLS_PER_RUN", 50_000)
FRONTIER_MAX_RUN_CONCURRENCY = env_int("FRONTIER_MAX_RUN_CONCURRENCY", 16)
FRONTIER_MAX_ACTIVE_RUNS_PER_USER = env_int("FRONTIER_MAX_ACTIVE_RUNS_PER_USER", 5)
# External runs (optimizer/external/services.py, docs/external-runs.md "Limits"):
# the events one run's log may hold, and the events one user's trackers may send
# a minute (beyond it a batch is refused with 429 and Retry-After).
FRONTIER_EXTERNAL_EVENTS_PER_RUN = env_int("FRONTIER_EXTERNAL_EVENTS_PER_RUN", 200_000)
FRONTIER_EXTERNAL_EVENTS_PER_MINUTE = env_int("FRONTIER_EXTERNAL_EVENTS_PER_MINUTE", 6_000)
# An external run whose tracker sent nothing (no batch, no stop poll) this long is
# abandoned: it ends, and frees its owner's active-run slot.
FRONTIER_EXTERNAL_SILENT_SECONDS = env_int("FRONTIER_EXTERNAL_SILENT_SECONDS", 300)

RUNS_DIR = Path(env_str("FRONTIER_RUNS_DIR", str(DATA_DIR / "runs")))

# --- Auth -------------------------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# Login and API-token throttling (dashboard/throttle.py, docs/security.md "Login throttling").
LOGIN_FAILURES_PER_ACCOUNT = env_int("FRONTIER_LOGIN_FAILURES_PER_ACCOUNT", 10)
LOGIN_FAILURES_PER_IP = env_int("FRONTIER_LOGIN_FAILURES_PER_IP", 50)
LOGIN_THROTTLE_WINDOW_SECONDS = env_int("FRONTIER_LOGIN_WINDOW_SECONDS", 900)
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [STATIC_DIR]
# Served by ServeStatic from here (dashboard/asgi.py, dashboard/staticfiles.py):
# content-hashed, gzip and brotli, in both modes; `manage.py serve` collects first.
STATIC_ROOT = Path(env_str("FRONTIER_STATIC_ROOT", str(DATA_DIR / "static")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "dashboard.staticfiles.FrontierStaticFilesStorage"},
}
# Source maps (django-ninja's API docs ship 5 MB of them) are for developer tools:
# not worth brotli's time at every collectstatic.
SERVESTATIC_SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]

# --- The web server (dashboard/server.py) and request bodies (dashboard/body_guard.py) ---
# A connection must complete a request's headers this long after it opens (or
# after the request's first byte); an idle keep-alive connection closes after
# FRONTIER_HTTP_KEEP_ALIVE_SECONDS; a client that reads nothing of a response
# for FRONTIER_STALLED_CLIENT_SECONDS (a paused download) is disconnected.
FRONTIER_HTTP_HEADER_SECONDS = env_int("FRONTIER_HTTP_HEADER_SECONDS", 10)
FRONTIER_HTTP_KEEP_ALIVE_SECONDS = env_int("FRONTIER_HTTP_KEEP_ALIVE_SECONDS", 5)
FRONTIER_STALLED_CLIENT_SECONDS = env_int("FRONTIER_STALLED_CLIENT_SECONDS", 600)
# Any body above this is refused (413) before it is read; the run import (50 MB)
# is the largest upload.
FRONTIER_MAX_REQUEST_BYTES = env_int("FRONTIER_MAX_REQUEST_BYTES", 52 * 1024 * 1024)
# A body Django reads into memory (JSON, form fields): the API's task-set import
# carries a file of up to 10 MB as JSON text.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("FRONTIER_MAX_BODY_BYTES", 12 * 1024 * 1024)
# Uploaded files above this go to a temporary file, not memory (Django's default, made explicit).
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Behind HTTPS (docs/deployment.md "Behind HTTPS"): all off by default, since the
# embedded mode and the tests serve plain HTTP on 127.0.0.1.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
# "Header-Name: value" the TLS-terminating proxy sets, e.g. "X-Forwarded-Proto: https".
SECURE_PROXY_SSL_HEADER = proxy_ssl_header(
    "SECURE_PROXY_SSL_HEADER", env_str("SECURE_PROXY_SSL_HEADER")
)
# Where users reach this site: links printed by the CLI and returned by the API.
# Unset, links use the address `manage.py serve` listens on (dashboard/lib/site_url.py).
BASE_URL = env_str("FRONTIER_BASE_URL", "").rstrip("/")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # HTTP client libraries log every request at INFO: that would interleave with
    # `optimize run --wait`'s progress bar and flood worker logs.
    "loggers": {
        name: {"level": "WARNING"}
        for name in ("uvicorn.error", "celery", "httpx", "httpx2", "httpcore", "openai")
    },
}

CELERY_WORKER_HIJACK_ROOT_LOGGER = False
