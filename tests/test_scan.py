"""Secret rules: true positives per rule, near-misses, allow-list, redaction properties.

Every fake key is assembled at run time from pieces, so this file does not itself look like
a leaked credential to other scanners.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from tether.errors import AllowListError
from tether.scan import RULE_IDS, fingerprint, load_allow, marker, redact, redact_bytes, scan
from tether.scan.secrets import redact_many

AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SESSION_KEY = "ASIA" + "Z2Y3X4W5V6U7T8S9"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG" + "/bPxRfiCYEXAMPLEKEY"
GH_CLASSIC = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"
GH_APP = "ghs_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt" + "3Ss2Rr1Qq0Pp9Oo8"
GH_FINE = "github_pat_" + "11ABCDEFG0" + "abcdefghijkl" + "_" + "Mn0Pq1Rs2Tu3" * 4 + "Vw4Xy5Zab6cde"
SLACK = "xoxb-" + "1234567890123-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
OPENAI = "sk-" + "AbCdEfGhIjKlMnOpQrSt" + "T3BlbkFJ" + "UvWxYz0123456789AbCd"
OPENAI_PROJ = "sk-" + "proj-" + "Ab3_cD4-eF5g" * 8
ANTHROPIC = "sk-" + "ant-api03-" + "Zx9_Qw8-Er7t" * 8 + "AA"
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"
STRIPE_RK = "rk_" + "test_" + "51HxYzAbCdEfGhIjKlMnOp"
STRIPE_WH = "whsec_" + "AbCdEfGhIjKlMnOpQrStUvWx0123"
PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2" + "\nKvUwZ4kXbY9uJ0p8fQ1+aBcDeFgHiJkLmNoPq==\n"
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\n" + PEM_BODY + "-----END RSA PRIVATE KEY-----"
PEM_OPENSSH = (
    "-----BEGIN " + "OPENSSH PRIVATE KEY-----\n" + PEM_BODY + "-----END OPENSSH PRIVATE KEY-----"
)
JWT = (
    "eyJ"
    + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
    + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PASSWORD = "corr3ct-h0rse" + "-battery"

# (rule, text, the secret part that must disappear)
TRUE_POSITIVES: list[tuple[str, str, str]] = [
    ("aws-access-key", f"export AWS_ACCESS_KEY_ID={AWS_KEY}\n", AWS_KEY),
    ("aws-access-key", f"session key {AWS_SESSION_KEY} expires soon", AWS_SESSION_KEY),
    ("aws-secret-key", f"aws_secret_access_key = {AWS_SECRET}\n", AWS_SECRET),
    ("aws-secret-key", f'AWS_SECRET_ACCESS_KEY: "{AWS_SECRET}"', AWS_SECRET),
    ("github-token", f"git clone https://{GH_CLASSIC}@github.com/o/r", GH_CLASSIC),
    ("github-token", f"token was {GH_APP}.", GH_APP),
    ("github-token", f"GH={GH_FINE}", GH_FINE),
    ("slack-token", f"slack bot token {SLACK} (rotated)", SLACK),
    ("openai-key", f"OPENAI_API_KEY={OPENAI}", OPENAI),
    ("openai-key", f"use {OPENAI_PROJ} for the project", OPENAI_PROJ),
    ("anthropic-key", f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
    ("stripe-key", f"stripe.api_key = {STRIPE}", STRIPE),
    ("stripe-key", f"restricted {STRIPE_RK}", STRIPE_RK),
    ("stripe-key", f"webhook secret {STRIPE_WH}", STRIPE_WH),
    ("pem-private-key", f"the key:\n{PEM}\nkeep it safe", PEM),
    ("pem-private-key", f"{PEM_OPENSSH}\n", PEM_OPENSSH),
    ("pem-private-key", '{"k": "' + PEM.replace("\n", "\\n") + '"}', PEM.replace("\n", "\\n")),
    ("jwt", f"Authorization: Bearer {JWT}", JWT),
    ("password-assignment", f'DB_PASSWORD = "{PASSWORD}"', PASSWORD),
    ("password-assignment", f'{{"password": "{PASSWORD}", "user": "me"}}', PASSWORD),
    ("password-assignment", f"api_key: '{PASSWORD}'", PASSWORD),
    ("password-assignment", f'token := "{PASSWORD}"', PASSWORD),
    ("password-assignment", f"clientSecret => '{PASSWORD}'", PASSWORD),
    ("password-assignment", f'{{"content": "passwd = \\"{PASSWORD}\\"\\n"}}', PASSWORD),
    # Unquoted (issue 34): an assignment, a colon with a value that is no prose word.
    ("password-assignment", "password = hunter2\n", "hunter2"),
    ("password-assignment", "DB_PASSWD=Tr0ub4dor&3 rest", "Tr0ub4dor"),
    ("password-assignment", "GET /login?user=sam&pwd=s3cret!&next=/", "s3cret!"),
    ("password-assignment", "wifi pw: 4417-ab\n", "4417-ab"),
    ("password-assignment", "passwd: Swordf1sh\n", "Swordf1sh"),
    ("password-assignment", '{"password": 12345678}', "12345678"),
    ("url-password", "[store]\nurl = postgres://u:pw@h/db", "pw"),
    ("url-password", f"clone https://sam:{PASSWORD}@git.example.org/r", PASSWORD),
    ("url-password", "amqp://guest:g:u%40e5t@rabbit:5672/", "g:u%40e5t"),
]

NEAR_MISSES = [
    "The skeleton key was in the desk drawer; ask the risk team about tokens.",
    'password = ""',
    "password: the one you chose last week",
    "short hex like deadbeef, cafe0123 and a sha 3f2a9c1 are fine",
    'tokenizer = "gpt2"',
    "max_tokens = 512",
    "AKIA is just a prefix, and ASIA PACIFIC is a region",
    "ghp_short and github_pat_ alone",
    "sk-learn and sk-some-hyphenated-identifier-name-here",
    "xoxo-hugs-and-kisses-forever and xoxb-letters-only-here",
    "eyJ alone, and eyJhbGciOiJIUzI1NiJ9 with one part",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
    'password = "${DB_PASSWORD}"',
    'api_key: "<your-api-key>"',
    'secret = "****"',
    "sk_live_short and rk_test_",
    "The secret: keep it between us.",
    'password = "[REDACTED:password-assignment]"',
    # Unquoted values that are code, prose or placeholders (issue 34).
    "password = None",
    "password = getpass.getpass()",
    "password = getpass()",
    "password = self.password",
    "pwd = os.getcwd()",
    "password: str",
    "password: see the vault",
    "Password: ********",
    "password=${DB_PASSWORD}",
    "password = <your password>",
    "the password is hunter2, said nobody",
    "mypw=abc123 is not a password key",
    "postgresql://postgres@127.0.0.1:5432/test",
    "http://host:8080/path@example",
    "git@github.com:owner/repo.git and ssh://git@host:22/r",
    "https://user:${PASSWORD}@example.org/",
]


@pytest.mark.parametrize(("rule", "text", "secret"), TRUE_POSITIVES)
def test_true_positive(rule: str, text: str, secret: str) -> None:
    findings = scan(text)
    assert [f.rule for f in findings] == [rule]
    assert text[findings[0].start : findings[0].end] == secret
    red = redact(text)
    assert secret not in red.text
    assert marker(rule) in red.text
    assert red.counts == {rule: 1}
    assert red.findings == tuple(findings)


def test_every_rule_has_a_true_positive() -> None:
    assert {rule for rule, _, _ in TRUE_POSITIVES} == set(RULE_IDS)


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_miss_is_not_flagged(text: str) -> None:
    assert scan(text) == []
    assert redact(text).text == text


def test_assignment_keeps_the_key_name() -> None:
    out = redact(f'DB_PASSWORD = "{PASSWORD}"').text
    assert out == 'DB_PASSWORD = "[REDACTED:password-assignment]"'


def test_overlap_is_one_redaction_labelled_by_the_longest_hit() -> None:
    # The quoted value is exactly a JWT: the specific rule names it.
    out = redact(f'token = "{JWT}"')
    assert out.text == 'token = "[REDACTED:jwt]"'
    assert out.counts == {"jwt": 1}
    # The value holds more than the key: the longer value wins, nothing is left over.
    out = redact(f'secret = "x{AWS_KEY}y"')
    assert out.text == 'secret = "[REDACTED:password-assignment]"'


def test_secret_inside_a_turned_down_run_is_still_found() -> None:
    # A run that is no secret as a whole must not hide one that starts inside it.
    lower_proj = "sk-" + "proj-" + "abcdefghijklmnopqrstuvwx"
    out = redact("sk-some-hyphenated-name-" + lower_proj).text
    assert lower_proj not in out
    out = redact("eyJ." + JWT[3:] + "x." + JWT).text
    assert JWT not in out


def test_truncated_pem_block_is_redacted_to_the_end_of_the_text() -> None:
    # With no END line, where the key stops is unknown: a body line that is not plain
    # base64 (quoted, indented by '> ', cut mid-line) must not be left in clear.
    cut = "-----BEGIN " + "EC PRIVATE KEY-----\n" + PEM_BODY + "> rV9xQ2mZ+/7kLpWc\nthe end"
    out = redact("before\n" + cut).text
    assert out == "before\n[REDACTED:pem-private-key]"


def test_truncated_pem_block_stops_at_the_next_armour() -> None:
    cut = "-----BEGIN " + "EC PRIVATE KEY-----\n" + PEM_BODY
    cert = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----"
    out = redact(cut + cert).text
    assert out == "[REDACTED:pem-private-key]" + cert


def test_finding_never_shows_the_secret() -> None:
    (finding,) = scan(f"key {AWS_KEY}")
    assert AWS_KEY not in repr(finding)
    assert AWS_KEY not in str(finding)
    assert AWS_KEY not in repr(redact(f"key {AWS_KEY}"))


def test_spans_are_character_offsets_in_non_ascii_text() -> None:
    text = f"clé 🔑 «{AWS_KEY}» fin"
    (finding,) = scan(text)
    assert text[finding.start : finding.end] == AWS_KEY
    assert redact(text).text == "clé 🔑 «[REDACTED:aws-access-key]» fin"


def test_redact_bytes_gives_byte_offsets_and_the_same_text() -> None:
    text = f"clé 🔑 «{AWS_KEY}» fin"
    data = text.encode()
    out = redact_bytes(data)
    (finding,) = out.findings
    assert data[finding.start : finding.end] == AWS_KEY.encode()
    assert out.data == redact(text).text.encode()
    assert out.counts == {"aws-access-key": 1}
    clean = b"nothing to see"
    assert redact_bytes(clean).data is clean


def test_allow_fingerprint_keeps_a_reviewed_false_positive() -> None:
    text = f"example key {AWS_KEY} and {GH_CLASSIC}"
    (first, _) = scan(text)
    allow = frozenset({first.fingerprint_in(text)})
    assert first.fingerprint_in(text) == fingerprint(AWS_KEY)
    out = redact(text, allow=allow)
    assert AWS_KEY in out.text
    assert GH_CLASSIC not in out.text
    assert out.allowed == 1
    assert out.counts == {"github-token": 1}
    assert [f.rule for f in scan(text, allow=allow)] == ["github-token"]


def test_load_allow_reads_fingerprints_and_comments() -> None:
    fp = fingerprint(AWS_KEY)
    content = f"# reviewed 2026-11-01\n\n{fp.upper()}  # the docs example key\n"
    assert load_allow(content) == frozenset({fp})


def test_load_allow_refuses_a_bad_line() -> None:
    with pytest.raises(AllowListError) as err:
        load_allow("# ok\nnot-a-fingerprint\n", source="/h/.tether-scan-allow")
    assert err.value.line == 2
    assert "/h/.tether-scan-allow:2" in str(err.value)


# -- properties -------------------------------------------------------------------------

SECRETS = [secret for rule, _, secret in TRUE_POSITIVES if rule != "password-assignment"]
ASSIGNMENTS = [text for rule, text, _ in TRUE_POSITIVES if rule == "password-assignment"]
FRAGMENTS = [
    "password",
    "token",
    "secret",
    "api_key",
    "aws_secret_access_key",
    " = ",
    ": ",
    '"',
    "'",
    "\\",
    '\\"',
    "\n",
    "\\n",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "eyJ",
    ".",
    "sk-",
    "sk_live_",
    "AKIA",
    "xoxb-",
    "ghp_",
    "[REDACTED:jwt]",
    "${X}",
    "<",
    ">",
    "é",
    "🔑",
]
prose = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40
) | st.text(alphabet="abcXYZ019_-=:/+. \n\"'", max_size=60)
texts = st.lists(prose | st.sampled_from(FRAGMENTS + SECRETS + ASSIGNMENTS), max_size=25).map(
    "".join
)


@given(texts)
@example(f'password = "-----BEGIN PRIVATE KEY-----\n{PEM_BODY}-----END PRIVATE KEY----- x"')
@example(f"token = '<{AWS_KEY}>'")
def test_redact_is_idempotent_and_leaves_no_finding(text: str) -> None:
    once = redact(text)
    assert scan(once.text) == []
    assert redact(once.text).text == once.text
    assert redact_bytes(text.encode()).data == once.text.encode()


@given(prose, st.sampled_from(TRUE_POSITIVES), prose)
def test_embedded_secret_never_survives(
    prefix: str, case: tuple[str, str, str], suffix: str
) -> None:
    _, text, secret = case
    out = redact(prefix + text + suffix).text
    assert secret not in out


@given(prose, prose, st.text(alphabet="abcdefXYZ0123456789-_!", min_size=6, max_size=30))
def test_embedded_password_value_never_survives(prefix: str, suffix: str, value: str) -> None:
    assume(value not in prefix and value not in suffix)
    out = redact(f'{prefix}\nDB_PASSWORD = "{value}"{suffix}').text
    assert value not in out


@settings(max_examples=400)
@given(st.lists(texts | st.sampled_from([PEM, PEM_BODY, "\x00", "a\x00b", ""]), max_size=12))
@example([PEM.split("-----END")[0], "-----END RSA PRIVATE KEY-----", "plain"])
@example(["token = ", f"'{AWS_KEY}'", f"password = 'x{AWS_KEY}'"])
def test_redact_many_is_redacting_each_text_alone(rows: list[str]) -> None:
    assert redact_many(rows) == [redact(r).text for r in rows]
    allow = frozenset(fingerprint(s) for s in SECRETS[:3])
    assert redact_many(rows, allow=allow) == [redact(r, allow=allow).text for r in rows]
