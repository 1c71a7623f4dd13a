package org.tserve.archive;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.After;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

/** allowed_urls applies to every form of url: redirects, encoded dot segments, bare paths and directories. */
public class ModelLocatorTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private Path store;
    private Path outside;
    private HttpServer allowedHost;
    private HttpServer otherHost;

    @Before
    public void setUp() throws Exception {
        store = tmp.newFolder("store").toPath();
        outside = tmp.newFolder("outside").toPath();
        Files.write(outside.resolve("secret.mar"), "PK".getBytes(StandardCharsets.UTF_8));
        Files.write(store.resolve("here.mar"), "PK".getBytes(StandardCharsets.UTF_8));
        otherHost = serve(null);
        allowedHost = serve("http://127.0.0.1:" + otherHost.getAddress().getPort() + "/m.mar");
    }

    @After
    public void tearDown() {
        allowedHost.stop(0);
        otherHost.stop(0);
    }

    /** A server on 127.0.0.1: /m.mar answers bytes; /away redirects to {@code away}; /self to /m.mar here. */
    private static HttpServer serve(String away) throws Exception {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        s.createContext("/", ex -> {
            String p = ex.getRequestURI().getPath();
            if (p.startsWith("/away") && away != null) {
                ex.getResponseHeaders().set("Location", away);
                ex.sendResponseHeaders(302, -1);
            } else if (p.startsWith("/self")) {
                ex.getResponseHeaders().set("Location", "/m.mar");
                ex.sendResponseHeaders(301, -1);
            } else {
                byte[] b = "PKdata".getBytes(StandardCharsets.UTF_8);
                ex.sendResponseHeaders(200, b.length);
                ex.getResponseBody().write(b);
            }
            ex.close();
        });
        s.start();
        return s;
    }

    private ModelLocator locator(String... allowed) {
        return new ModelLocator(store.toString(), List.of(allowed), 1 << 20);
    }

    private static void assertRefused(ModelLocator l, String url, int status, String expected) {
        try {
            ModelLocator.Located at = l.locate(url);
            fail(url + " was located at " + at.path);
        } catch (ArchiveException e) {
            assertEquals(e.getMessage(), status, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains(expected));
        }
    }

    @Test
    public void everyRedirectHopIsChecked() throws Exception {
        String allowed = "http://127\\.0\\.0\\.1:" + allowedHost.getAddress().getPort() + "/.*";
        ModelLocator l = locator(allowed);
        String base = "http://127.0.0.1:" + allowedHost.getAddress().getPort();
        assertRefused(l, base + "/away/m.mar", 404, "redirects to http://127.0.0.1:" + otherHost.getAddress().getPort());
        assertFalse(Files.exists(store.resolve("m.mar")));
        // a redirect to an allowed URL is followed
        ModelLocator.Located at = l.locate(base + "/self/x.mar");
        assertEquals(store.resolve("x.mar"), at.path);
        assertEquals("PKdata", new String(Files.readAllBytes(at.path), StandardCharsets.UTF_8));
    }

    @Test
    public void httpUrlsAreCheckedAsTheRemoteServerReadsThem() throws Exception {
        // issue 27: "/ok/%2e%2e/bad/x.mar" passed an "/ok/.*" rule; a normalising server serves /bad/x.mar
        String host = "http://127.0.0.1:" + allowedHost.getAddress().getPort();
        ModelLocator l = locator("http://127\\.0\\.0\\.1:" + allowedHost.getAddress().getPort() + "/ok/.*");
        for (String path : List.of("/ok/%2e%2e/bad/x.mar", "/ok/%2E%2e/bad/x.mar", "/ok/.%2e/bad/x.mar",
                "/ok/%2e/x.mar", "/ok/a/%2E%2E/%2e%2e/bad/x.mar")) {
            assertRefused(l, host + path, 400, "dot segment");
        }
        assertRefused(l, host + "/ok/..%2fbad/x.mar", 404, "Relative path");   // a literal ".." stays TorchServe's 404
        assertRefused(l, host + "/ok/a%2f..%2fbad/x.mar", 404, "Relative path");
        assertRefused(l, host + "/ok/a%2Fb/x.mar", 400, "encoded '/'");
        assertRefused(l, host + "/ok/a%5cb/x.mar", 400, "encoded '/'");
        // "/%6fk/" is "/ok/" to the remote server but not to the rule as written: refused either way
        assertRefused(l, host + "/%6fk/x.mar", 404, "does not match any allowed URL");
        assertEquals("http://h:1/ok/a b/x.mar?q=%2e",
                ModelLocator.normalisedHttpUrl("http://h:1/ok/a%20b/x.mar?q=%2e", "u"));
        assertFalse(Files.exists(store.resolve("x.mar")));
    }

    @Test
    public void encodedDotSegmentsInFileUrlsAreRefused() throws Exception {
        ModelLocator l = locator("file://" + store + "/.*");
        String storeUrl = store.toUri().toString();   // file:///.../store/
        assertRefused(l, storeUrl + "%2e%2e/outside/secret.mar", 404, "Relative path is not allowed");
        assertRefused(l, storeUrl + "%2E%2E/outside/secret.mar", 404, "Relative path is not allowed");
        assertRefused(l, storeUrl + "%252e%252e/outside/secret.mar", 404, "Model not found");
        assertEquals(store.resolve("here.mar"), l.locate(storeUrl + "here.mar").path);
    }

    @Test
    public void barePathsAndDirectoriesObeyAllowedUrls() throws Exception {
        ModelLocator l = locator("http://127\\.0\\.0\\.1:1/.*");
        assertRefused(l, outside.resolve("secret.mar").toString(), 404, "does not match any allowed URL");
        assertRefused(l, outside.toString(), 404, "does not match any allowed URL");
        assertRefused(l, "/etc", 404, "does not match any allowed URL");
        assertRefused(l, outside.toUri().toString() + "secret.mar", 404, "does not match any allowed URL");
        // the model store needs no pattern: by name, by absolute path, as a directory
        assertEquals(store.resolve("here.mar"), l.locate("here.mar").path);
        assertEquals(store.resolve("here.mar"), l.locate(store.resolve("here.mar").toString()).path);
        Files.createDirectories(store.resolve("dir"));
        assertEquals(store.resolve("dir"), l.locate("dir").path);
        // a pattern that allows the path does
        ModelLocator open = locator("file://" + outside + "/.*");
        assertEquals(outside.resolve("secret.mar"), open.locate(outside.resolve("secret.mar").toString()).path);
    }

    @Test
    public void aStorePathWithDotDotIsTheOperatorsAndWorks() throws Exception {
        String viaDotDot = outside.resolve("..").resolve("store").toString();   // .../outside/../store
        ModelLocator l = new ModelLocator(viaDotDot, List.of(), 1 << 20);
        assertEquals(store.resolve("here.mar"), l.locate("here.mar").path);
        assertRefused(l, "../outside/secret.mar", 404, "Relative path is not allowed");
    }
}
