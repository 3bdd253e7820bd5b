"""An SMTP receiver for tests/email.rs: aiosmtpd on 127.0.0.1, parsing every message it
accepts with Python's email package and appending one JSON line per message to LOG:
{"mail_from", "rcpt_tos", "tls", "login", "from", "to", "subject", "message_id",
"content_type", "text", "html"}. While the file DOWN exists it answers every recipient with a
transient 451 (the sender must retry) and logs {"refused": RECIPIENT}. Listens on PORT (0: any
free one) and prints "listening PORT" once it accepts connections.

usage: receiver.py LOG DOWN PORT [--starttls CERT KEY | --implicit CERT KEY]
                   [--login USER PASSWORD]

--starttls: the session must be upgraded with STARTTLS before MAIL (require_starttls), using
CERT and KEY. --implicit: TLS from the first byte (SMTPS). --login: AUTH (PLAIN or LOGIN) with
exactly USER and PASSWORD is required, and only over TLS.
"""

import argparse
import asyncio
import email
import email.policy
import json
import os
import ssl

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

parser = argparse.ArgumentParser()
parser.add_argument("log")
parser.add_argument("down")
parser.add_argument("port", type=int)
tls = parser.add_mutually_exclusive_group()
tls.add_argument("--starttls", nargs=2, metavar=("CERT", "KEY"))
tls.add_argument("--implicit", nargs=2, metavar=("CERT", "KEY"))
parser.add_argument("--login", nargs=2, metavar=("USER", "PASSWORD"))
args = parser.parse_args()


def part(msg, subtype):
    body = msg.get_body(preferencelist=(subtype,))
    if body is None or body.get_content_subtype() != subtype:
        return None
    return body.get_content()


def append(record):
    with open(args.log, "a") as f:
        f.write(json.dumps(record) + "\n")


def server_context(cert, key):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def header(msg, name):
    value = msg[name]
    return None if value is None else str(value)


def login_of(session):
    data = session.auth_data
    return data.login.decode() if isinstance(data, LoginPassword) else None


class Handler:
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if os.path.exists(args.down):
            append({"refused": address})
            return "451 4.3.0 Receiver down for the test, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "tls": server.transport.get_extra_info("ssl_object") is not None,
            "login": login_of(session),
            "from": header(msg, "From"),
            "to": header(msg, "To"),
            "subject": header(msg, "Subject"),
            "message_id": header(msg, "Message-ID"),
            "content_type": msg.get_content_type(),
            "text": part(msg, "plain"),
            "html": part(msg, "html"),
        }
        append(record)
        return "250 Message accepted"


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = (
        args.login is not None
        and isinstance(auth_data, LoginPassword)
        and auth_data.login.decode() == args.login[0]
        and auth_data.password.decode() == args.login[1]
    )
    return AuthResult(success=ok, auth_data=auth_data if ok else None)


def factory():
    kwargs = {}
    if args.starttls:
        kwargs.update(tls_context=server_context(*args.starttls), require_starttls=True)
    if args.login:
        kwargs.update(authenticator=authenticator, auth_required=True)
        # aiosmtpd knows only STARTTLS as TLS; an SMTPS socket is encrypted from the start.
        if args.implicit:
            kwargs.update(auth_require_tls=False)
    return SMTP(Handler(), hostname="receiver.test", **kwargs)


async def main():
    loop = asyncio.get_running_loop()
    wrap = server_context(*args.implicit) if args.implicit else None
    server = await loop.create_server(factory, "127.0.0.1", args.port, ssl=wrap)
    print("listening", server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


asyncio.run(main())
