"""The numbers of the pseudonyms deleted accounts leave in a mind's history ("deleted user
17": minds.services.account_delete). A sequence of their own, not the user's id: the
pseudonym links to nothing else that named the person."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("minds", "0007_invitations"),
    ]

    operations = [
        migrations.RunSQL("CREATE SEQUENCE minds_deleted_user_seq",
                          "DROP SEQUENCE minds_deleted_user_seq"),
    ]
