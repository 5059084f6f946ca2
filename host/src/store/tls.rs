//! TLS to PostgreSQL, chosen by the database address as libpq chooses it: `sslmode` =
//! `disable`, `prefer` (the default: TLS when the server offers it), `require` (TLS or no
//! connection), `verify-ca` (and the certificate chains to `sslrootcert`) or `verify-full`
//! (and it names the host connected to). As in libpq, `prefer` and `require` check the
//! certificate only when `sslrootcert` names a CA file; then `require` is `verify-ca`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// How much of the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Encrypted, certificate not checked (`prefer`/`require` without a CA file).
    Nothing,
    /// The certificate chains to the CA file.
    Chain,
    /// That, and it names the host.
    ChainAndName,
}

/// The address for tokio-postgres (which knows `disable`, `prefer` and `require` only)
/// and the TLS connector for it.
pub(super) fn from_address(url: &str) -> Result<(String, PgTls), String> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        // The key=value form: tokio-postgres reads its sslmode (no verify-* there).
        let config = client_config(Check::Nothing, RootCertStore::empty())?;
        return Ok((url.to_string(), PgTls { config }));
    }
    let mut mode = None;
    let mut root_cert = None;
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("sslmode", value)) => mode = Some(value.to_string()),
            Some(("sslrootcert", value)) => root_cert = Some(value.to_string()),
            _ => kept.push(pair.to_string()),
        }
    }
    let (driver_mode, check) = match (mode.as_deref(), root_cert.is_some()) {
        (None | Some("prefer"), false) => ("prefer", Check::Nothing),
        (None | Some("prefer"), true) => ("prefer", Check::Chain),
        (Some("disable"), _) => ("disable", Check::Nothing),
        (Some("require"), false) => ("require", Check::Nothing),
        (Some("require" | "verify-ca"), true) => ("require", Check::Chain),
        (Some("verify-full"), true) => ("require", Check::ChainAndName),
        (Some(mode @ ("verify-ca" | "verify-full")), false) => {
            return Err(format!(
                "sslmode={mode} needs sslrootcert=FILE, the CA certificate (PEM) that signed the server's"
            ));
        }
        (Some(other), _) => {
            return Err(format!(
                "sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"
            ));
        }
    };
    kept.push(format!("sslmode={driver_mode}"));
    let roots = match &root_cert {
        None => RootCertStore::empty(),
        Some(file) => read_roots(file)?,
    };
    let config = client_config(check, roots)?;
    Ok((format!("{base}?{}", kept.join("&")), PgTls { config }))
}

fn read_roots(file: &str) -> Result<RootCertStore, String> {
    let certificates = CertificateDer::pem_file_iter(file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("sslrootcert={file}: {e}"))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(format!("sslrootcert={file} holds no usable CA certificate"));
    }
    Ok(roots)
}

fn client_config(check: Check, roots: RootCertStore) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match check {
        Check::Nothing => Arc::new(AnyCertificate(provider.clone())),
        Check::Chain | Check::ChainAndName => {
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| format!("the CA certificate: {e}"))?;
            Arc::new(Verified {
                webpki,
                names: check == Check::ChainAndName,
            })
        }
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// `prefer`/`require` without a CA: the session is encrypted, its certificate taken as
/// it comes (the handshake's signatures are still checked), as libpq does.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The certificate chains to the CA file; with `names`, it also names the host.
#[derive(Debug)]
struct Verified {
    webpki: Arc<WebPkiServerVerifier>,
    names: bool,
}

impl ServerCertVerifier for Verified {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            // verify-ca: a chain to the CA is enough, whatever host it names.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.names => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// tokio-postgres's TLS hook, over rustls.
#[derive(Clone)]
pub(super) struct PgTls {
    config: Arc<ClientConfig>,
}

impl<S> MakeTlsConnect<S> for PgTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type TlsConnect = PgTlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, host: &str) -> Result<PgTlsConnect, io::Error> {
        // Asked for every connection, a Unix socket's too (host ""), which never uses TLS:
        // a host that is no server name is an error only if a handshake is tried.
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("'{host}': {e}")));
        Ok(PgTlsConnect {
            config: self.config.clone(),
            name,
        })
    }
}

pub(super) struct PgTlsConnect {
    config: Arc<ClientConfig>,
    name: io::Result<ServerName<'static>>,
}

impl<S> TlsConnect<S> for PgTlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<PgTlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let connector = tokio_rustls::TlsConnector::from(self.config);
            Ok(PgTlsStream(connector.connect(self.name?, stream).await?))
        })
    }
}

pub(super) struct PgTlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for PgTlsStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for PgTlsStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for PgTlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        // No SCRAM channel binding: the password exchange does not depend on it.
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(url: &str) -> Result<String, String> {
        from_address(url).map(|(address, _)| address)
    }

    #[test]
    fn the_address_keeps_libpqs_modes() {
        assert_eq!(
            address("postgres://a@h/db").unwrap(),
            "postgres://a@h/db?sslmode=prefer"
        );
        assert_eq!(
            address("postgres://a@h/db?sslmode=require&application_name=x").unwrap(),
            "postgres://a@h/db?application_name=x&sslmode=require"
        );
        assert_eq!(
            address("postgres://a@h/db?sslmode=disable").unwrap(),
            "postgres://a@h/db?sslmode=disable"
        );
        let needs_ca = address("postgres://a@h/db?sslmode=verify-full").unwrap_err();
        assert!(needs_ca.contains("needs sslrootcert"), "{needs_ca}");
        assert!(address("postgres://a@h/db?sslmode=allow-anything").is_err());
        let missing = address("postgres://a@h/db?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem").unwrap_err();
        assert!(missing.contains("/nonexistent/ca.pem"), "{missing}");
    }
}
