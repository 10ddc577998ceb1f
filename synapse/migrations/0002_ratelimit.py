"""Rate-limit counters in their own UNLOGGED table (see synapse.models.RateLimit)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("synapse", "0001_cache_table")]

    operations = [
        migrations.CreateModel(
            name="RateLimit",
            fields=[
                ("key", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("tat", models.FloatField(db_index=True)),
            ],
            options={"db_table": "synapse_ratelimit"},
        ),
        migrations.RunSQL("ALTER TABLE synapse_ratelimit SET UNLOGGED",
                          "ALTER TABLE synapse_ratelimit SET LOGGED"),
    ]
