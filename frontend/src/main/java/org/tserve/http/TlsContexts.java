package org.tserve.http;

import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManagerFactory;
import org.apache.logging.log4j.Logger;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;
import org.tserve.util.Logging;

/**
 * The server TLS context of {@code https://} REST addresses, from the keys TorchServe reads:
 * {@code keystore} (+ {@code keystore_pass}, {@code keystore_type}) first, else
 * {@code private_key_file} (PEM: PKCS#8 or OpenSSL's traditional RSA) + {@code certificate_file}
 * (PEM, the chain), else a self-signed certificate made at startup.
 * TLS 1.2 and 1.3 with the JDK's default cipher suites.
 */
public final class TlsContexts {
    private static final Logger LOG = Logging.logger(TlsContexts.class);
    private static final Pattern PEM_KEY = Pattern.compile(
        "-----BEGIN ((?:RSA |EC )?PRIVATE KEY)-----([A-Za-z0-9+/=\\s]+)-----END \\1-----");
    private static final String[] PROTOCOLS = {"TLSv1.3", "TLSv1.2"};

    private TlsContexts() {
    }

    /** Builds the context; a missing or unreadable file is a ConfigException naming its key. */
    public static SslContext server(ConfigManager cfg) {
        String keystore = blankToNull(cfg.get("keystore"));
        String keyFile = blankToNull(cfg.get("private_key_file"));
        String certFile = blankToNull(cfg.get("certificate_file"));
        try {
            SslContextBuilder b;
            if (keystore != null) {
                b = SslContextBuilder.forServer(keyManagers(keystore, cfg.get("keystore_pass"), cfg.get("keystore_type")));
            } else if (keyFile != null || certFile != null) {
                if (keyFile == null || certFile == null) {
                    throw new ConfigException("https:// addresses need both 'private_key_file' and 'certificate_file' (PEM files), "
                            + "or a 'keystore'; only " + (keyFile == null ? "certificate_file" : "private_key_file") + " is set");
                }
                b = SslContextBuilder.forServer(privateKey(keyFile), certificates(certFile));
            } else {
                b = selfSigned();
            }
            return b.protocols(PROTOCOLS).build();
        } catch (IOException | GeneralSecurityException e) {
            throw new ConfigException("Cannot set up TLS for the https:// addresses: " + e.getMessage());
        }
    }

    private static String blankToNull(String s) {
        return s == null || s.trim().isEmpty() ? null : s.trim();
    }

    private static Path readable(String key, String file) {
        Path p = Paths.get(file);
        if (!Files.isRegularFile(p) || !Files.isReadable(p)) {
            throw new ConfigException("'" + key + "' = " + file + " is not a readable file (needed by the https:// addresses)");
        }
        return p;
    }

    private static KeyManagerFactory keyManagers(String file, String pass, String type) throws IOException, GeneralSecurityException {
        Path p = readable("keystore", file);
        KeyStore ks = KeyStore.getInstance(type == null || type.isEmpty() ? "PKCS12" : type);
        char[] password = pass == null ? new char[0] : pass.toCharArray();
        try (InputStream in = Files.newInputStream(p)) {
            ks.load(in, password);
        } catch (IOException e) {
            throw new ConfigException("Cannot open keystore " + file + " (keystore_type " + ks.getType() + "): " + e.getMessage()
                    + " (wrong keystore_pass?)");
        }
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(ks, password);
        return kmf;
    }

    static X509Certificate[] certificates(String file) throws IOException, CertificateException {
        Path p = readable("certificate_file", file);
        try (InputStream in = Files.newInputStream(p)) {
            X509Certificate[] chain = CertificateFactory.getInstance("X.509").generateCertificates(in)
                .stream().map(c -> (X509Certificate) c).toArray(X509Certificate[]::new);
            if (chain.length == 0) {
                throw new ConfigException("'certificate_file' = " + file + " holds no certificate");
            }
            return chain;
        }
    }

    /** A PEM private key: PKCS#8 ({@code BEGIN PRIVATE KEY}) or PKCS#1 ({@code BEGIN RSA PRIVATE KEY}). */
    static PrivateKey privateKey(String file) throws IOException, GeneralSecurityException {
        Path p = readable("private_key_file", file);
        Matcher m = PEM_KEY.matcher(new String(Files.readAllBytes(p), StandardCharsets.US_ASCII));
        if (!m.find()) {
            throw new ConfigException("'private_key_file' = " + file + " holds no unencrypted PEM private key "
                    + "(BEGIN PRIVATE KEY or BEGIN RSA PRIVATE KEY); convert it with: openssl pkcs8 -topk8 -nocrypt");
        }
        byte[] der = Base64.getMimeDecoder().decode(m.group(2));
        switch (m.group(1)) {
            case "RSA PRIVATE KEY":
                return KeyFactory.getInstance("RSA").generatePrivate(new PKCS8EncodedKeySpec(pkcs1ToPkcs8(der)));
            case "EC PRIVATE KEY":
                throw new ConfigException("'private_key_file' = " + file + " is a SEC1 EC key; convert it to PKCS#8 with: "
                        + "openssl pkcs8 -topk8 -nocrypt -in " + file);
            default:
                for (String alg : new String[] {"RSA", "EC", "Ed25519", "DSA"}) {
                    try {
                        return KeyFactory.getInstance(alg).generatePrivate(new PKCS8EncodedKeySpec(der));
                    } catch (GeneralSecurityException e) {
                        // try the next algorithm
                    }
                }
                throw new ConfigException("'private_key_file' = " + file + ": unsupported private key algorithm");
        }
    }

    /** Wraps an RSAPrivateKey (PKCS#1) in a PrivateKeyInfo (PKCS#8) with the rsaEncryption algorithm. */
    static byte[] pkcs1ToPkcs8(byte[] pkcs1) {
        byte[] algorithm = {0x30, 0x0d, 0x06, 0x09, 0x2a, (byte) 0x86, 0x48, (byte) 0x86, (byte) 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00};
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        body.writeBytes(new byte[] {0x02, 0x01, 0x00});   // version 0
        body.writeBytes(algorithm);
        body.writeBytes(derHeader(0x04, pkcs1.length));
        body.writeBytes(pkcs1);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes(derHeader(0x30, body.size()));
        out.writeBytes(body.toByteArray());
        return out.toByteArray();
    }

    private static byte[] derHeader(int tag, int length) {
        if (length < 0x80) {
            return new byte[] {(byte) tag, (byte) length};
        }
        int bytes = length > 0xffffff ? 4 : length > 0xffff ? 3 : length > 0xff ? 2 : 1;
        byte[] h = new byte[2 + bytes];
        h[0] = (byte) tag;
        h[1] = (byte) (0x80 | bytes);
        for (int i = 0; i < bytes; i++) {
            h[2 + i] = (byte) (length >>> (8 * (bytes - 1 - i)));
        }
        return h;
    }

    /**
     * TorchServe's fallback: a self-signed certificate made at startup. Netty's own generator needs
     * Bouncy Castle or JDK internals on Java 17, so the JDK's keytool makes it into a throwaway store.
     */
    private static SslContextBuilder selfSigned() throws IOException, GeneralSecurityException {
        Path keytool = Paths.get(System.getProperty("java.home"), "bin", "keytool");
        Path dir = Files.createTempDirectory("tserve-tls-");
        Path store = dir.resolve("self-signed.p12");
        String pass = java.util.UUID.randomUUID().toString();
        try {
            Process p = new ProcessBuilder(keytool.toString(), "-genkeypair", "-keyalg", "RSA", "-keysize", "2048",
                "-validity", "3650", "-alias", "tserve", "-dname", "CN=localhost", "-ext", "SAN=dns:localhost,ip:127.0.0.1",
                "-storetype", "PKCS12", "-keystore", store.toString(), "-storepass", pass, "-keypass", pass)
                .redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new ConfigException("https:// addresses need 'private_key_file' + 'certificate_file' (PEM) or a 'keystore' "
                        + "in config.properties (making a self-signed certificate with " + keytool + " failed: " + out.trim() + ")");
            }
            LOG.warn("https:// address without certificate_file/private_key_file/keystore: serving a self-signed "
                    + "certificate (CN=localhost) made at startup");
            return SslContextBuilder.forServer(keyManagers(store.toString(), pass, "PKCS12"));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while making a self-signed certificate", e);
        } finally {
            Files.deleteIfExists(store);
            Files.deleteIfExists(dir);
        }
    }
}
