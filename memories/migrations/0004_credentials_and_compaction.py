"""Encrypt existing ``credentials`` content, then let the database refuse plaintext ones."""

from django.db import migrations, models
from django.db.models import Q

from memories.crypto import FERNET_PREFIX, encrypt


def encrypt_existing_credentials(apps, schema_editor):
    for model_name in ("Memory", "MemoryVersion"):
        model = apps.get_model("memories", model_name)
        rows = model.objects.filter(category="credentials").exclude(
            content__startswith=FERNET_PREFIX).only("pk", "content")
        for row in rows.iterator(chunk_size=500):
            model.objects.filter(pk=row.pk).update(content=encrypt(row.content))


class Migration(migrations.Migration):
    dependencies = [("memories", "0003_change_cursor")]

    operations = [
        migrations.RunPython(encrypt_existing_credentials, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="memory",
            constraint=models.CheckConstraint(
                condition=~Q(category="credentials") | Q(content__startswith=FERNET_PREFIX),
                name="memory_credentials_encrypted"),
        ),
        migrations.AddConstraint(
            model_name="memoryversion",
            constraint=models.CheckConstraint(
                condition=~Q(category="credentials") | Q(content__startswith=FERNET_PREFIX),
                name="memory_version_credentials_encrypted"),
        ),
    ]
