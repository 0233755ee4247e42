import uuid
from unittest import mock

from supervisor.devstack import kafka


def test_cluster_id_never_starts_with_a_dash() -> None:
    # 0xf8 as the first byte encodes to "-" in URL-safe base64; the second draw does not.
    dashed = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))
    plain = uuid.UUID(bytes=bytes([0x10]) + bytes(15))
    with mock.patch.object(kafka.uuid, "uuid4", side_effect=[dashed, plain]):
        cluster_id = kafka._cluster_id()
    assert not cluster_id.startswith("-")
    assert cluster_id.startswith("E")
    assert len(cluster_id) == 22
