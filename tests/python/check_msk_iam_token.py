"""Checks an MSK IAM SASL/OAUTHBEARER token independently of the code that
signed it: decodes it, checks every parameter, and re-signs the same request
with botocore's SigV4QueryAuth (what AWS's aws-msk-iam-sasl-signer-python
uses) at the same time with the same credentials; the signatures must match.

Usage: check_msk_iam_token.py CASE.json, where CASE holds token,
access_key_id, secret_access_key, session_token (or null), region and
signing_time (YYYYMMDDTHHMMSSZ). Prints one line per check and
"N passed, M failed"; exits 1 when any check failed.
"""

import base64
import datetime
import json
import re
import sys
from urllib.parse import parse_qsl, urlsplit

import botocore.auth
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}{'' if ok else ': ' + detail}")


def botocore_query(case):
    """The query botocore signs for the same request, as a dict."""
    at = datetime.datetime.strptime(case["signing_time"], "%Y%m%dT%H%M%SZ")
    botocore.auth.get_current_datetime = lambda *a, **k: at
    request = AWSRequest(
        method="GET",
        url=f"https://kafka.{case['region']}.amazonaws.com/",
        params={"Action": "kafka-cluster:Connect"},
    )
    credentials = Credentials(
        case["access_key_id"], case["secret_access_key"], case["session_token"]
    )
    SigV4QueryAuth(credentials, "kafka-cluster", case["region"], expires=900).add_auth(
        request
    )
    return dict(parse_qsl(urlsplit(request.url).query, keep_blank_values=True))


def main(path):
    with open(path) as f:
        case = json.load(f)
    token = case["token"]
    check("token is base64url without padding", re.fullmatch(r"[A-Za-z0-9_-]+", token) is not None, token[:16])
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    parts = urlsplit(url)
    check("scheme and host", (parts.scheme, parts.netloc) == ("https", f"kafka.{case['region']}.amazonaws.com"), url)
    check("path is /", parts.path == "/", parts.path)
    pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=True)
    names = [k for k, _ in pairs]
    check("no repeated parameter", len(names) == len(set(names)), str(names))
    check("User-Agent is appended last", names[-1:] == ["User-Agent"], str(names))
    ours = dict(pairs)
    agent = ours.pop("User-Agent", "")
    check("User-Agent names a client", re.fullmatch(r"[\w.-]+/[\w.-]+", agent) is not None, agent)
    date = case["signing_time"]
    want = {
        "Action": "kafka-cluster:Connect",
        "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
        "X-Amz-Credential": f"{case['access_key_id']}/{date[:8]}/{case['region']}/kafka-cluster/aws4_request",
        "X-Amz-Date": date,
        "X-Amz-Expires": "900",
        "X-Amz-SignedHeaders": "host",
    }
    if case["session_token"] is not None:
        want["X-Amz-Security-Token"] = case["session_token"]
    for k, v in want.items():
        check(f"{k} = {v if k != 'X-Amz-Security-Token' else '<session token>'}", ours.get(k) == v, repr(ours.get(k)))
    extra = set(ours) - set(want) - {"X-Amz-Signature"}
    check("no other parameter", not extra, str(sorted(extra)))
    theirs = botocore_query(case)
    check("botocore signs the same parameters", set(theirs) == set(ours), f"{sorted(theirs)} vs {sorted(ours)}")
    check(
        "signature matches botocore's SigV4QueryAuth",
        ours.get("X-Amz-Signature") == theirs.get("X-Amz-Signature"),
        f"ours {ours.get('X-Amz-Signature')} botocore {theirs.get('X-Amz-Signature')}",
    )
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
