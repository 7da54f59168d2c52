"""Security material for `LocalCluster(secure=True)` (`sessionizer cluster up --secure`).

Everything lives under `<cluster dir>/security/` (mode 0700, every file 0600):

| file | what |
|---|---|
| `ca.p12` | the local CA's key and certificate (PKCS12) |
| `ca.pem` | the CA certificate, PEM, for clients (`ssl.ca.location`) |
| `broker.keystore.p12` | the brokers' key and certificate (signed by the CA, with the chain) |
| `broker.truststore.p12` | the CA certificate, for the brokers' own inter-broker connections |
| `client.properties` | Kafka client properties of the `sessionizer` user (`--kafka-config`) |
| `secrets.json` | every password (stores, SCRAM users, ZooKeeper identities) |

Certificates are made with the JDK's `keytool` only (store passwords reach it
through the environment, never its command line).  The broker certificate's
subject alternative names are `ip:127.0.0.1`, `dns:localhost` and every other
address the servers bind, so clients can check the host name.

Kafka: one `SASL_SSL` listener (SCRAM-SHA-512) serves clients and the brokers
among themselves (user `admin`); the KRaft controller listener stays PLAINTEXT
on the servers' address.  Both SCRAM users exist from the first start: they are
written into the metadata log when the storage is formatted (`--add-scram`, in
the salted form, so no password appears on a command line).

ZooKeeper: digest authentication needs no server setting; the app's znodes are
protected by the ACLs the project sets for the `--zk-auth` identity
(`digest:sessionizer:<password>`).  A super identity (`digest:super:<password>`)
is configured through `DigestAuthenticationProvider.superDigest`, for cleanup.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import os
import secrets
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from framework.kernel.errors import ClusterError

__all__ = [
    "CLIENT_USER",
    "SCRAM_MECHANISM",
    "SECURITY_DIR",
    "ClusterSecurity",
]

SECURITY_DIR = "security"
SCRAM_MECHANISM = "SCRAM-SHA-512"
CLIENT_USER = "sessionizer"
ADMIN_USER = "admin"
ZK_USER = "sessionizer"
ZK_SUPER_USER = "super"
LISTENER = "SASL_SSL"  # the listener's name, and its security protocol
_SCRAM_ITERATIONS = 8192
_SECRETS_FILE = "secrets.json"
_CLIENT_PROPERTIES = "client.properties"
_PASSWORDS = ("ca", "keystore", "truststore", "kafka_admin", "kafka_client", "zk_app", "zk_super")
_KEYTOOL_TIMEOUT = 180.0
# A short-lived JVM per keytool call: quick start-up matters more than peak speed.
_KEYTOOL_JVM = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-J-Xmx64m")
_CA_DAYS = 3650
_CERT_DAYS = 825


def _keytool() -> str:
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "keytool" if home else None
    if candidate is not None and candidate.exists():
        return str(candidate)
    found = shutil.which("keytool")
    if not found:
        raise ClusterError("no keytool on PATH (or JAVA_HOME): install a JDK 17 or newer")
    return found


def _san_entry(host: str) -> str:
    try:
        return f"ip:{ipaddress.ip_address(host)}"
    except ValueError:
        return f"dns:{host}"


def _san(hosts: Iterable[str]) -> str:
    """`ip:127.0.0.1,dns:localhost,...` for keytool's `-ext SAN=`."""
    entries = ["ip:127.0.0.1", "dns:localhost"]
    for entry in map(_san_entry, hosts):
        if entry not in entries:
            entries.append(entry)
    return ",".join(entries)


def _private_file(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read (created 0600, never wider)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    path.chmod(0o600)


@dataclass(frozen=True, eq=False)
class ClusterSecurity:
    """The CA, broker stores, SCRAM users and ZooKeeper identities of one secured cluster."""

    directory: Path
    hosts: tuple[str, ...]
    """Addresses the servers bind (in the broker certificate besides 127.0.0.1/localhost)."""
    passwords: dict[str, str] = field(repr=False)

    # -- creation and loading -------------------------------------------------------------

    @classmethod
    def create(cls, cluster_dir: Path, hosts: Sequence[str]) -> ClusterSecurity:
        """Generate fresh material under `cluster_dir/security` (replacing an older one)."""
        directory = Path(cluster_dir).resolve() / SECURITY_DIR
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True, mode=0o700)
        directory.chmod(0o700)
        security = cls(
            directory,
            tuple(dict.fromkeys(h for h in hosts if h)),
            {
                **{name: secrets.token_hex(16) for name in _PASSWORDS},
                # SCRAM salts: random, and the same for every broker that formats its storage.
                **{f"{key}_salt": secrets.token_hex(16) for key in ("kafka_admin", "kafka_client")},
            },
        )
        security._make_certificates()
        _private_file(
            directory / _SECRETS_FILE,
            json.dumps({"hosts": list(security.hosts), "passwords": security.passwords}, indent=2)
            + "\n",
        )
        _private_file(directory / _CLIENT_PROPERTIES, security._client_properties_text())
        return security

    @classmethod
    def load(cls, cluster_dir: Path) -> ClusterSecurity | None:
        """The material `create` left in `cluster_dir`, or None if there is none."""
        directory = Path(cluster_dir).resolve() / SECURITY_DIR
        try:
            saved = json.loads((directory / _SECRETS_FILE).read_text())
        except (OSError, ValueError):
            return None
        return cls(directory, tuple(saved["hosts"]), dict(saved["passwords"]))

    @staticmethod
    def remove(cluster_dir: Path) -> None:
        """Delete the material of an earlier secured cluster in `cluster_dir`, if any."""
        shutil.rmtree(Path(cluster_dir) / SECURITY_DIR, ignore_errors=True)

    # -- files ------------------------------------------------------------------------------

    @property
    def ca_pem(self) -> Path:
        """The CA certificate in PEM, for clients."""
        return self.directory / "ca.pem"

    @property
    def keystore(self) -> Path:
        """The brokers' PKCS12 keystore."""
        return self.directory / "broker.keystore.p12"

    @property
    def truststore(self) -> Path:
        """The brokers' PKCS12 truststore (the CA)."""
        return self.directory / "broker.truststore.p12"

    @property
    def client_properties_path(self) -> Path:
        """The Kafka client properties file for `--kafka-config`."""
        return self.directory / _CLIENT_PROPERTIES

    # -- Kafka --------------------------------------------------------------------------

    @property
    def client_user(self) -> str:
        """The SCRAM user clients authenticate as."""
        return CLIENT_USER

    @property
    def hostname_check(self) -> bool:
        """Whether every address the brokers advertise is in the certificate (by construction)."""
        names = set(_san(self.hosts).split(","))
        return all(_san_entry(host) in names for host in self.hosts)

    @property
    def client_properties(self) -> dict[str, str]:
        """The client properties (standard names) of the `sessionizer` SCRAM user."""
        return {
            "security.protocol": LISTENER,
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": CLIENT_USER,
            "sasl.password": self.passwords["kafka_client"],
            "ssl.ca.location": str(self.ca_pem),
            "ssl.endpoint.identification.algorithm": "https" if self.hostname_check else "none",
        }

    def _client_properties_text(self) -> str:
        lines = ["# Written by `sessionizer cluster up --secure`: pass with --kafka-config."]
        lines += [f"{name}={value}" for name, value in self.client_properties.items()]
        return "\n".join(lines) + "\n"

    def broker_lines(self, host: str, port: int, controller_port: int) -> list[str]:
        """server.properties lines for a broker whose client listener is SASL_SSL.

        The listener serves clients and the brokers among themselves; the
        controller listener stays PLAINTEXT (KRaft controllers cannot use SCRAM).
        """
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN_USER}" password="{self.passwords["kafka_admin"]}";'
        )
        return [
            f"listeners={LISTENER}://{host}:{port},CONTROLLER://{host}:{controller_port}",
            f"advertised.listeners={LISTENER}://{host}:{port}",
            f"listener.security.protocol.map={LISTENER}:SASL_SSL,CONTROLLER:PLAINTEXT",
            f"inter.broker.listener.name={LISTENER}",
            f"sasl.enabled.mechanisms={SCRAM_MECHANISM}",
            f"sasl.mechanism.inter.broker.protocol={SCRAM_MECHANISM}",
            f"listener.name.{LISTENER.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config={jaas}",
            "ssl.keystore.type=PKCS12",
            f"ssl.keystore.location={self.keystore}",
            f"ssl.keystore.password={self.passwords['keystore']}",
            f"ssl.key.password={self.passwords['keystore']}",
            "ssl.truststore.type=PKCS12",
            f"ssl.truststore.location={self.truststore}",
            f"ssl.truststore.password={self.passwords['truststore']}",
            "ssl.endpoint.identification.algorithm=https",
            "ssl.client.auth=none",
        ]

    def secure_server_properties(
        self, lines: Sequence[str], host: str, port: int, controller_port: int
    ) -> list[str]:
        """`lines` (a plain broker's server.properties) with the listeners made SASL_SSL."""
        replacement = self.broker_lines(host, port, controller_port)
        replaced = {line.split("=", 1)[0] for line in replacement}
        kept = [line for line in lines if line.split("=", 1)[0] not in replaced]
        return [*kept, *replacement]

    def scram_arguments(self) -> list[str]:
        """`kafka-storage format` arguments that create the SCRAM users, salted.

        The salted form (`iterations`, `salt`, `saltedpassword`) is what Kafka
        stores anyway; it keeps the passwords off the tool's command line.
        """
        arguments = []
        for user, key in ((ADMIN_USER, "kafka_admin"), (CLIENT_USER, "kafka_client")):
            salt = bytes.fromhex(self.passwords[f"{key}_salt"])
            salted = hashlib.pbkdf2_hmac(
                "sha512", self.passwords[key].encode(), salt, _SCRAM_ITERATIONS
            )
            arguments.append(
                f"--add-scram={SCRAM_MECHANISM}=[name={user},iterations={_SCRAM_ITERATIONS},"
                f'salt="{base64.b64encode(salt).decode()}",'
                f'saltedpassword="{base64.b64encode(salted).decode()}"]'
            )
        return arguments

    # -- ZooKeeper ------------------------------------------------------------------------

    @property
    def zk_auth(self) -> str:
        """The app's ZooKeeper identity, as `--zk-auth` takes it."""
        return f"digest:{ZK_USER}:{self.passwords['zk_app']}"

    @property
    def zk_super_auth(self) -> str:
        """ZooKeeper's super identity (all rights on every znode), for cleanup."""
        return f"digest:{ZK_SUPER_USER}:{self.passwords['zk_super']}"

    @property
    def zk_super_digest(self) -> str:
        """`super:<base64 sha1>` for `DigestAuthenticationProvider.superDigest`."""
        identity = f"{ZK_SUPER_USER}:{self.passwords['zk_super']}"
        digest = base64.b64encode(hashlib.sha1(identity.encode()).digest()).decode()
        return f"{ZK_SUPER_USER}:{digest}"

    # -- for `cluster up` ----------------------------------------------------------------

    def exports(self) -> list[str]:
        """The `export` lines `cluster up --secure` prints besides ZK and BOOTSTRAP."""
        return [
            f"export SESSIONIZER_KAFKA_CONFIG={shlex.quote(str(self.client_properties_path))}",
            f"export SESSIONIZER_ZK_AUTH={shlex.quote(self.zk_auth)}",
        ]

    # -- keytool ------------------------------------------------------------------------

    def _make_certificates(self) -> None:
        """CA, broker key and certificate (chain), truststore, CA PEM: keytool only."""
        d = self.directory
        ca, broker = d / "ca.p12", self.keystore
        csr, signed, chain = d / "broker.csr", d / "broker.crt", d / "broker-chain.pem"
        ca_pass = ("-storepass:env", "SZ_CA_PASS")
        broker_pass = ("-storepass:env", "SZ_KEYSTORE_PASS")
        trust_pass = ("-storepass:env", "SZ_TRUSTSTORE_PASS")
        san = f"SAN={_san(self.hosts)}"
        ec = ("-keyalg", "EC", "-groupname", "secp256r1", "-storetype", "PKCS12")
        # Independent steps run side by side: each keytool call is a JVM start.
        self._keytool_parallel(
            [
                "-genkeypair", "-alias", "ca", *ec, "-dname", "CN=sessionizer local CA",
                "-ext", "bc:c", "-validity", str(_CA_DAYS), "-keystore", str(ca), *ca_pass,
            ],
            [
                "-genkeypair", "-alias", "broker", *ec, "-dname", "CN=localhost",
                "-ext", san, "-validity", str(_CERT_DAYS), "-keystore", str(broker),
                *broker_pass,
            ],
        )  # fmt: skip
        self._keytool_parallel(
            ["-exportcert", "-rfc", "-alias", "ca", "-keystore", str(ca), *ca_pass,
             "-file", str(self.ca_pem)],
            ["-certreq", "-alias", "broker", "-keystore", str(broker), *broker_pass,
             "-file", str(csr)],
        )  # fmt: skip
        self._keytool_parallel(
            [
                "-gencert", "-alias", "ca", "-keystore", str(ca), *ca_pass, "-infile", str(csr),
                "-outfile", str(signed), "-rfc", "-ext", san,
                "-ext", "ku:c=digitalSignature,keyEncipherment,keyAgreement",
                "-ext", "eku=serverAuth,clientAuth", "-validity", str(_CERT_DAYS),
            ],
            [
                "-importcert", "-alias", "ca", "-file", str(self.ca_pem), "-keystore",
                str(self.truststore), "-storetype", "PKCS12", *trust_pass, "-noprompt",
            ],
        )  # fmt: skip
        # The signed certificate followed by the CA: keytool installs the whole chain.
        _private_file(chain, signed.read_text() + self.ca_pem.read_text())
        self._keytool_parallel(
            ["-importcert", "-alias", "broker", "-file", str(chain), "-keystore", str(broker),
             *broker_pass, "-noprompt"],
        )  # fmt: skip
        for path in d.iterdir():
            path.chmod(0o600)

    def _keytool_parallel(self, *calls: list[str]) -> None:
        environment = {
            **os.environ,
            "SZ_CA_PASS": self.passwords["ca"],
            "SZ_KEYSTORE_PASS": self.passwords["keystore"],
            "SZ_TRUSTSTORE_PASS": self.passwords["truststore"],
        }
        keytool = _keytool()
        running = [
            (
                call,
                subprocess.Popen(
                    [keytool, *_KEYTOOL_JVM, *call],
                    env=environment,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    umask=0o077,
                ),
            )
            for call in calls
        ]
        failures = []
        for call, process in running:
            try:
                output, _ = process.communicate(timeout=_KEYTOOL_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                output, _ = process.communicate()
                output += f"\n(timed out after {_KEYTOOL_TIMEOUT:.0f}s)"
            if process.returncode != 0:
                failures.append(f"keytool {call[0]} failed: {output.strip()[-1500:]}")
        if failures:
            raise ClusterError("making the local cluster's certificates: " + "; ".join(failures))
