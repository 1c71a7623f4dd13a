package org.tserve.archive;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.zip.GZIPOutputStream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

public class ArchiveTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private static final String MANIFEST = "{\"runtime\": \"python\", \"model\": {\"modelName\": \"m\", \"handler\": \"h.py\", "
            + "\"modelVersion\": \"2.0\", \"configFile\": \"model-config.yaml\"}}";

    private Path zip(String name, String[][] entries) throws Exception {
        Path p = tmp.getRoot().toPath().resolve(name);
        try (ZipOutputStream z = new ZipOutputStream(Files.newOutputStream(p))) {
            for (String[] e : entries) {
                z.putNextEntry(new ZipEntry(e[0]));
                z.write(e[1].getBytes(StandardCharsets.UTF_8));
                z.closeEntry();
            }
        }
        return p;
    }

    private static void tarEntry(OutputStream out, String name, byte[] data) throws Exception {
        byte[] h = new byte[512];
        byte[] n = name.getBytes(StandardCharsets.UTF_8);
        System.arraycopy(n, 0, h, 0, n.length);
        System.arraycopy("0000644\0".getBytes(StandardCharsets.US_ASCII), 0, h, 100, 8);
        String size = String.format("%011o", data.length) + "\0";
        System.arraycopy(size.getBytes(StandardCharsets.US_ASCII), 0, h, 124, 12);
        h[156] = '0';
        System.arraycopy("ustar\0".getBytes(StandardCharsets.US_ASCII), 0, h, 257, 6);
        for (int i = 148; i < 156; i++) {
            h[i] = ' ';
        }
        int sum = 0;
        for (byte b : h) {
            sum += b & 0xff;
        }
        System.arraycopy(String.format("%06o\0 ", sum).getBytes(StandardCharsets.US_ASCII), 0, h, 148, 8);
        out.write(h);
        out.write(data);
        out.write(new byte[(512 - data.length % 512) % 512]);
    }

    @Test
    public void marIsExtractedWithManifestAndYaml() throws Exception {
        Path mar = zip("m.mar", new String[][] {{"MAR-INF/MANIFEST.json", MANIFEST}, {"h.py", "x = 1\n"},
            {"model-config.yaml", "batchSize: 3\nhandler:\n  max_length: 7\n"}});
        ModelArchive a = ModelArchive.open(mar, tmp.getRoot().toPath(), "m.mar", null);
        assertEquals("m", a.getManifest().modelName);
        assertEquals("2.0", a.getManifest().modelVersion);
        assertEquals(3, a.getYamlConfig().get("batchSize"));
        assertTrue(Files.isRegularFile(a.getModelDir().resolve("h.py")));
        assertTrue(a.getTmpDir().startsWith(tmp.getRoot().toPath().resolve("models")));
        a.delete();
        assertFalse(Files.exists(a.getTmpDir()));
    }

    @Test
    public void zipSlipIsRefused() throws Exception {
        Path mar = zip("evil.mar", new String[][] {{"../../escape.txt", "x"}});
        try {
            ModelArchive.open(mar, tmp.getRoot().toPath(), "evil.mar", null);
            fail("expected ArchiveException");
        } catch (ArchiveException e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("outside the archive"));
        }
        assertFalse(Files.exists(tmp.getRoot().toPath().getParent().resolve("escape.txt")));
    }

    @Test
    public void tarGzDropsTheFirstPathComponent() throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (GZIPOutputStream gz = new GZIPOutputStream(bytes)) {
            tarEntry(gz, "m/MAR-INF/MANIFEST.json", MANIFEST.replace(", \"configFile\": \"model-config.yaml\"", "")
                    .getBytes(StandardCharsets.UTF_8));
            tarEntry(gz, "m/h.py", "y = 2\n".getBytes(StandardCharsets.UTF_8));
            gz.write(new byte[1024]);
        }
        Path tgz = tmp.getRoot().toPath().resolve("m.tar.gz");
        Files.write(tgz, bytes.toByteArray());
        ModelArchive a = ModelArchive.open(tgz, tmp.getRoot().toPath(), "m.tar.gz", null);
        assertEquals("m", a.getManifest().modelName);
        assertEquals("y = 2\n", new String(Files.readAllBytes(a.getModelDir().resolve("h.py")), StandardCharsets.UTF_8));
    }

    @Test
    public void missingConfigFileIsNamed() throws Exception {
        Path mar = zip("m2.mar", new String[][] {{"MAR-INF/MANIFEST.json", MANIFEST}});
        try {
            ModelArchive.open(mar, tmp.getRoot().toPath(), "m2.mar", null);
            fail("expected ArchiveException");
        } catch (ArchiveException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("model-config.yaml"));
        }
    }

    @Test
    public void locatorRefusesRelativePathsAndDisallowedUrls() throws Exception {
        ModelLocator l = new ModelLocator(tmp.getRoot().getPath(), List.of("https://models\\.example/.*"), 1000);
        try {
            l.locate("../x.mar");
            fail();
        } catch (ArchiveException e) {
            assertEquals(404, e.getStatus());
        }
        try {
            l.locate("http://elsewhere/x.mar");
            fail();
        } catch (ArchiveException e) {
            assertEquals(404, e.getStatus());
            assertTrue(e.getMessage().contains("allowed"));
        }
        try {
            l.locate("nothere.mar");
            fail();
        } catch (ArchiveException e) {
            assertEquals(404, e.getStatus());
        }
        Files.createFile(tmp.getRoot().toPath().resolve("here.mar"));
        assertEquals(tmp.getRoot().toPath().resolve("here.mar"), l.locate("here.mar").path);
    }
}
