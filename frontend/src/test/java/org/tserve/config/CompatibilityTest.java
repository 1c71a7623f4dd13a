package org.tserve.config;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.archive.ArchiveException;
import org.tserve.archive.ModelLocator;

/** The compatibility switch: read once from config.properties, asked by the error paths. */
public class CompatibilityTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    @After
    public void reset() {
        Compatibility.install(Compatibility.TSERVE);
    }

    private ConfigManager load(String props) throws Exception {
        File f = tmp.newFile();
        Files.write(f.toPath(), props.getBytes(StandardCharsets.UTF_8));
        return new ConfigManager(Arguments.parse(new String[] {"-f", f.getPath()}), Map.of());
    }

    @Test
    public void theSwitchIsReadOnceAndEveryRowFollowsIt() throws Exception {
        load("compatibility=torchserve-0.12\n");
        Compatibility c = Compatibility.current();
        assertEquals(Compatibility.TORCHSERVE_0_12, c);
        assertEquals(400, c.badKeyStatus());
        assertTrue(c.badKeyMessage("tserve's").startsWith("Token Authorization failed."));
        assertEquals(500, c.responseTimeoutStatus());
        assertEquals("Worker died.", c.responseTimeoutMessage("tserve's"));
        assertEquals(500, c.archiveExistsStatus());
        load("");
        c = Compatibility.current();
        assertEquals(Compatibility.TSERVE, c);
        assertEquals(401, c.badKeyStatus());
        assertEquals("tserve's", c.badKeyMessage("tserve's"));
        assertEquals(504, c.responseTimeoutStatus());
        assertEquals(409, c.archiveExistsStatus());
    }

    @Test
    public void booleansAreTorchServesUnderTheSwitchOnly() throws Exception {
        ConfigManager cfg = load("enable_envvars_config=2\ncompatibility=torchserve-0.12\n");
        assertFalse("anything but true is false, as TorchServe reads it", cfg.getBool("enable_envvars_config"));
        try {
            load("enable_envvars_config=2\n");
            fail("tserve refuses a boolean that is neither true nor false");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("enable_envvars_config"));
        }
    }

    @Test
    public void anUnknownValueIsAnErrorNamingTheKey() throws Exception {
        try {
            load("compatibility=torchserve-0.11\n");
            fail("unknown compatibility value accepted");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("'compatibility'") && e.getMessage().contains("torchserve-0.12"));
        }
    }

    @Test
    public void anArchiveAlreadyInTheStoreIs409Or500() throws Exception {
        Path store = tmp.newFolder("store").toPath();
        Files.write(store.resolve("m.mar"), new byte[] {1});
        com.sun.net.httpserver.HttpServer http = com.sun.net.httpserver.HttpServer.create(
                new java.net.InetSocketAddress("127.0.0.1", 0), 0);
        http.createContext("/", ex -> {
            ex.sendResponseHeaders(200, 1);
            ex.getResponseBody().write(1);
            ex.close();
        });
        http.start();
        try {
            String url = "http://127.0.0.1:" + http.getAddress().getPort() + "/m.mar";
            ModelLocator locator = new ModelLocator(store.toString(), List.of("http://127\\.0\\.0\\.1:.*"), 1 << 20);
            for (Compatibility c : Compatibility.values()) {
                Compatibility.install(c);
                try {
                    locator.locate(url);
                    fail("an archive already in the store was overwritten");
                } catch (ArchiveException e) {
                    assertEquals(c.archiveExistsStatus(), e.getStatus());
                    assertTrue(e.getMessage(), e.getMessage().startsWith("Model file already exists"));
                }
            }
        } finally {
            http.stop(0);
        }
    }
}
