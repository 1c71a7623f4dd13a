package org.tserve.http;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.KeyPairGenerator;
import java.security.PrivateKey;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.config.Arguments;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;

/** https:// address parsing and the PEM key reader (the TLS handshakes are tested end to end in Python). */
public class TlsContextsTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private ConfigManager config(String props) throws Exception {
        File f = tmp.newFile();
        Files.write(f.toPath(), props.getBytes(StandardCharsets.UTF_8));
        return new ConfigManager(Arguments.parse(new String[] {"-f", f.getPath()}), new HashMap<>());
    }

    @Test
    public void httpsAddressesAndTheirDefaultPorts() throws Exception {
        ConfigManager c = config("inference_address=https://127.0.0.1\nmanagement_address=https://0.0.0.0\n"
                + "metrics_address=HTTPS://127.0.0.1:9443\n");
        assertTrue(c.address("inference_address").tls);
        assertEquals(443, c.address("inference_address").port);
        assertEquals(8444, c.address("management_address").port);
        assertEquals(9443, c.address("metrics_address").port);
        assertEquals("https://127.0.0.1:9443", c.address("metrics_address").toString());
        ConfigManager plain = config("inference_address=http://127.0.0.1\n");
        assertFalse(plain.address("inference_address").tls);
        assertEquals(80, plain.address("inference_address").port);
        assertEquals(8081, plain.address("management_address").port);
        try {
            config("inference_address=ftp://127.0.0.1:1\n");
            fail("ftp accepted");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("https://host:port"));
        }
    }

    @Test
    public void keystoreKeysAreNoLongerIgnored() throws Exception {
        ConfigManager c = config("keystore=/x.p12\n");
        assertTrue(c.getWarnings().toString(), c.getWarnings().isEmpty());
        assertEquals("changeit", c.get("keystore_pass"));
        assertEquals("PKCS12", c.get("keystore_type"));
    }

    @Test
    public void traditionalRsaKeyIsWrappedAsPkcs8() throws Exception {
        KeyPairGenerator g = KeyPairGenerator.getInstance("RSA");
        g.initialize(2048);
        PrivateKey key = g.generateKeyPair().getPrivate();
        byte[] pkcs8 = key.getEncoded();
        // PrivateKeyInfo: SEQUENCE(4) version(3) AlgorithmIdentifier(15) OCTET STRING(4) then the PKCS#1 key
        byte[] pkcs1 = Arrays.copyOfRange(pkcs8, 26, pkcs8.length);
        assertArrayEquals(pkcs8, TlsContexts.pkcs1ToPkcs8(pkcs1));

        File rsa = tmp.newFile("rsa.pem");
        Files.writeString(rsa.toPath(), "-----BEGIN RSA PRIVATE KEY-----\n"
                + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(pkcs1)
                + "\n-----END RSA PRIVATE KEY-----\n");
        assertArrayEquals(pkcs8, TlsContexts.privateKey(rsa.getPath()).getEncoded());
        File p8 = tmp.newFile("p8.pem");
        Files.writeString(p8.toPath(), "-----BEGIN PRIVATE KEY-----\n" + Base64.getMimeEncoder().encodeToString(pkcs8)
                + "\n-----END PRIVATE KEY-----\n");
        assertArrayEquals(pkcs8, TlsContexts.privateKey(p8.getPath()).getEncoded());
    }

    @Test
    public void encryptedOrMissingKeysAreConfigErrors() throws Exception {
        File enc = tmp.newFile("enc.pem");
        Files.writeString(enc.toPath(), "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n");
        for (String path : new String[] {enc.getPath(), tmp.getRoot() + "/missing.pem"}) {
            try {
                TlsContexts.privateKey(path);
                fail(path + " accepted");
            } catch (ConfigException e) {
                assertTrue(e.getMessage(), e.getMessage().contains("private_key_file"));
            }
        }
    }
}
