"""Reserved for search-document changes (issue 3); no operations yet."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memories", "0001_initial")]
    operations = []
