"""Project-wide tables that belong to no app: the rate-limit counters."""

from django.db import models


class RateLimit(models.Model):
    """One rate-limit budget (scope + Mind Key, user or client address) as GCRA keeps it:
    the theoretical arrival time of the next request, in epoch seconds.

    The table is UNLOGGED (migration 0002): counters need no crash safety, and writing
    them costs no WAL flush on every limited request. With read replicas it also holds
    each principal's last write (``written:<principal>``, synapse.db_router), whose tat
    is when that mark expires."""

    key = models.CharField(max_length=200, primary_key=True)
    tat = models.FloatField(db_index=True)

    class Meta:
        db_table = "synapse_ratelimit"

    def __str__(self) -> str:
        return self.key
