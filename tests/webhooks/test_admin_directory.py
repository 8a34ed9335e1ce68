"""Finding learners: GET /admin/learners?address=, the paged list, and a learner named by
address in the memory, recall and forget paths."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from memory.database.records import LEARNER, PAM
from memory.store.message_store import Store
from tests.conftest import unique_user
from tests.webhooks.test_admin import ADMIN, bearer, client_for
from webhooks.addresses import BadAddress, stored_address
from webhooks.settings import Settings

PHONE = "+34600111222"


def unique_phone() -> str:
    """A WhatsApp address no other test uses (Postgres is shared across tests)."""
    return f"whatsapp:+3469{uuid.uuid4().int % 10**9:09d}"


@pytest.fixture
def client(settings: Settings, engine: Engine) -> FlaskClient:
    return client_for(settings, engine)


def test_finds_a_telegram_learner_by_address_with_settings_and_times(
    store: Store, client: FlaskClient
) -> None:
    address = f"telegram:{unique_user()[5:]}"
    learner = store.learners.learner(address, display_name="Lena")
    store.learners.update_settings(learner.id, target_language="Spanish", level="A2")
    store.conversation.add_message(learner.id, LEARNER, "Hola, soy Lena", 5)
    store.conversation.add_message(learner.id, PAM, "¡Hola Lena!", 5)

    response = client.get("/admin/learners", query_string={"address": address}, headers=bearer())

    assert response.status_code == 200
    found = response.get_json()["learner"]
    assert found["id"] == learner.id and found["address"] == address
    assert found["display_name"] == "Lena"
    assert found["settings"] == {
        "target_language": "Spanish",
        "native_language": None,
        "level": "A2",
        "voice_replies": False,
    }
    created = datetime.fromisoformat(found["created_at"])
    last = datetime.fromisoformat(found["last_message_at"])
    assert created.tzinfo is not None and created <= last
    assert "Hola" not in response.get_data(as_text=True)  # who and when, never their words


def test_a_learner_who_never_wrote_has_no_last_message_time(
    store: Store, client: FlaskClient
) -> None:
    address = unique_user()
    store.learners.learner(address)
    found = client.get(f"/admin/learners?address={address}", headers=bearer()).get_json()
    assert found["learner"]["last_message_at"] is None


@pytest.mark.parametrize(
    "typed",
    [
        "whatsapp:+34600111222",
        "whatsapp:+34 600 111 222",
        "whatsapp:34600111222",
        "+34 600 111 222",
        "34600111222",
        "(+34) 600-111-222",
        " WhatsApp: +34.600.111.222 ",
    ],
)
def test_a_whatsapp_number_is_read_however_it_is_written(typed: str) -> None:
    assert stored_address(typed) == f"whatsapp:{PHONE}"


@pytest.mark.parametrize(
    "typed",
    [
        "",
        "   ",
        "telegram",
        "telegram:",
        ":777001",
        "whatsapp:+34abc",
        "whatsapp:+12",
        "a\x00b",
        "x:" + "y" * 300,
        "whatsapp:+" + "1" * 16,
    ],
)
def test_what_is_no_address_is_refused(typed: str) -> None:
    with pytest.raises(BadAddress):
        stored_address(typed)


def test_a_whatsapp_learner_is_found_by_their_number_as_typed(
    store: Store, client: FlaskClient
) -> None:
    address = unique_phone()
    number = address.removeprefix("whatsapp:+")
    spaced = f"+{number[:2]} {number[2:5]} {number[5:]}"
    learner = store.learners.learner(address)
    # A longer number that starts with theirs is someone else.
    store.learners.learner(f"{address}0")

    for typed in (address, spaced, number, f"whatsapp:{spaced}"):
        response = client.get("/admin/learners", query_string={"address": typed}, headers=bearer())
        assert response.status_code == 200, typed
        assert response.get_json()["learner"]["id"] == learner.id
    # A + left unencoded in a query string arrives as a space: the number is still found.
    raw = client.get(f"/admin/learners?address=+{number}", headers=bearer())
    assert raw.get_json()["learner"]["id"] == learner.id


def test_an_unknown_address_is_404_and_a_malformed_one_400(client: FlaskClient) -> None:
    unknown = client.get(f"/admin/learners?address={unique_user()}", headers=bearer())
    assert unknown.status_code == 404 and unknown.get_json()["detail"] == "no such learner"
    bad = client.get("/admin/learners?address=no-channel-here", headers=bearer())
    assert bad.status_code == 400 and bad.get_json()["error"] == "Bad Request"
    assert client.get("/admin/learners?address=", headers=bearer()).status_code == 400


def test_the_list_pages_through_every_learner_once_in_id_order(
    store: Store, client: FlaskClient
) -> None:
    ours = [store.learners.learner(unique_user(f"page{n}")).id for n in range(5)]
    cursor: str | None = str(ours[0] - 1)
    seen: list[int] = []
    pages = 0
    while cursor is not None and (not seen or seen[-1] < ours[-1]):
        response = client.get(f"/admin/learners?limit=2&after={cursor}", headers=bearer())
        assert response.status_code == 200
        body = response.get_json()
        assert len(body["learners"]) <= 2
        seen += [entry["id"] for entry in body["learners"]]
        cursor, pages = body["next"], pages + 1
    assert seen == sorted(set(seen))
    assert [i for i in seen if i in ours] == ours
    assert pages == 3


def test_the_last_page_has_no_next_cursor(store: Store, client: FlaskClient) -> None:
    newest = store.learners.learner(unique_user()).id
    body = client.get(f"/admin/learners?after={newest - 1}&limit=1", headers=bearer()).get_json()
    assert [entry["id"] for entry in body["learners"]] == [newest]
    assert body["next"] is None
    empty = client.get(f"/admin/learners?after={newest}", headers=bearer()).get_json()
    assert empty == {"learners": [], "next": None}


def test_the_default_page_is_bounded(store: Store, client: FlaskClient) -> None:
    body = client.get("/admin/learners", headers=bearer()).get_json()
    assert len(body["learners"]) <= 50


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=501",
        "limit=-1",
        "limit=ten",
        "limit=",
        "limit=1e3",
        "after=abc",
        "after=-5",
        "after=1.5",
        f"after={2**63}",
        f"after={2**64 + 7}",
        "after=" + "9" * 400,
        "after=%EF%BC%91",  # a fullwidth digit one
        "after=\x00",
    ],
)
def test_bad_paging_parameters_are_400(client: FlaskClient, query: str) -> None:
    response = client.get(f"/admin/learners?{query}", headers=bearer())
    assert response.status_code == 400
    assert response.get_json()["error"] == "Bad Request"


def test_the_largest_possible_cursor_is_an_empty_page(client: FlaskClient) -> None:
    body = client.get(f"/admin/learners?after={2**63 - 1}", headers=bearer()).get_json()
    assert body == {"learners": [], "next": None}


@pytest.mark.parametrize("ref", [str(2**63), str(2**64 + 1), "9" * 40, "0"])
def test_ids_no_learner_can_have_are_404_everywhere(client: FlaskClient, ref: str) -> None:
    assert client.get(f"/admin/learners/{ref}", headers=bearer()).status_code == 404
    assert client.get(f"/admin/learners/{ref}/memory", headers=bearer()).status_code == 404
    assert client.get(f"/admin/learners/{ref}/recall?q=hola", headers=bearer()).status_code == 404
    assert client.post(f"/admin/learners/{ref}/forget", headers=bearer()).status_code == 404


def test_memory_recall_and_forget_take_an_address_too(store: Store, client: FlaskClient) -> None:
    address = unique_phone()
    learner = store.learners.learner(address)
    store.conversation.add_message(learner.id, LEARNER, "Mi perra se llama Luna", 5)
    other = store.learners.learner(unique_phone())
    store.conversation.add_message(other.id, LEARNER, "Mi gato se llama Sol", 5)
    spaced = address.replace("+34", "+34 ")

    by_id = client.get(f"/admin/learners/{learner.id}/memory", headers=bearer()).get_json()
    by_address = client.get(f"/admin/learners/{spaced}/memory", headers=bearer())
    assert by_address.status_code == 200
    assert by_address.get_json() == by_id
    assert "Sol" not in by_address.get_data(as_text=True)
    one = client.get(f"/admin/learners/{address}", headers=bearer()).get_json()
    assert one["learner"]["id"] == learner.id
    recall = client.get(f"/admin/learners/{address}/recall?q=Luna", headers=bearer())
    assert recall.status_code == 200 and recall.get_json()["learner"] == learner.id

    assert client.post(f"/admin/learners/{address}/forget", headers=bearer()).status_code == 200
    assert store.learners.find_learner(address) is None
    assert store.learners.find_learner(other.external_id) is not None
    assert client.get(f"/admin/learners?address={address}", headers=bearer()).status_code == 404


def test_a_malformed_address_in_a_path_is_400(client: FlaskClient) -> None:
    response = client.get("/admin/learners/whatsapp:+12ab/memory", headers=bearer())
    assert response.status_code == 400


def test_the_directory_is_never_reachable_without_the_token(
    store: Store, settings: Settings, engine: Engine
) -> None:
    address = unique_user()
    store.learners.learner(address)
    client = client_for(settings, engine)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": ADMIN}):
        found = client.get(f"/admin/learners?address={address}", headers=headers)
        listed = client.get("/admin/learners", headers=headers)
        assert (found.status_code, listed.status_code) == (401, 401)
        assert address not in found.get_data(as_text=True) + listed.get_data(as_text=True)
    disabled = client_for(settings, engine, token=None)
    assert disabled.get("/admin/learners", headers=bearer()).status_code == 404
