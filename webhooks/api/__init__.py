"""The HTTP API channel, for custom front-ends (and the service's own end-to-end tests): the
JSON body validated (payload), the route (route), replies to the operator's callback URL
(sender), signed the Standard Webhooks way (signing), and its PAM_API_* settings (settings).

Inbound: `POST /api/messages` with `Authorization: Bearer $PAM_API_TOKEN` and JSON
`{"id": "<unique message id>", "user": "<user id>", "text": "...", "name": "<optional>"}`.
Answers 202 when accepted, 200 for a redelivery; disabled (404) while PAM_API_TOKEN is unset.

Outbound: each reply is POSTed as JSON `{"id", "in_reply_to", "user", "text"}` to
PAM_API_CALLBACK_URL, signed the Standard Webhooks way (standardwebhooks.com) with
PAM_API_TOKEN as the key: `webhook-id` (= `id`, an idempotency key stable across retries of the
same reply), `webhook-timestamp` (this attempt, Unix seconds) and `webhook-signature: v1,<base64
HMAC-SHA256 of "{id}.{timestamp}.{body}">`, so a receiver can reject replays. `in_reply_to` is
the `id` the client POSTed. The older `X-Pam-Signature` (HMAC of the body alone) is still sent.
A /progress reply also has `image_url`, the chart's signed, expiring link under PAM_PUBLIC_URL
(left out while PAM_PUBLIC_URL is unset)."""

CHANNEL = "api"
