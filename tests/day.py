"""The day every in-process test judges support windows on (``stacks.config.cluster.today``, set by
``tests/conftest.py``): a Kubernetes minor leaves EKS's standard support on a date, and no test's verdict may change
with the calendar. Shipped stacks are held to the calendar's day by tests/unit/test_shipped_minors.py."""

import datetime

#: Every supported minor but 1.32 and 1.33 is in standard support on this day.
TEST_DAY = datetime.date(2026, 11, 28)
