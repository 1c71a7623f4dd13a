package org.tserve.config;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

public class SnapshotStoreTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private static List<String> names(Path dir) throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().collect(Collectors.toList());
        }
    }

    @Test
    public void writesConfigPlusModelsKeepsTheNewestAndFindsTheLatest() throws Exception {
        Path dir = tmp.getRoot().toPath().resolve("logs").resolve("config");
        assertNull(SnapshotStore.latest(dir));
        ModelSnapshot models = new ModelSnapshot("", List.of(
                new ModelSnapshot.Version("m", "1.0", true, "m.mar", 1, 2, 1, 100, 120, 120, "python")));
        SnapshotStore store = new SnapshotStore(dir, 3, Map.of("job_queue_size", "10"), () -> models);
        store.writeNow("startup");
        for (int i = 0; i < 4; i++) {
            store.writeNow("snapshot");
        }
        store.writeNow("shutdown");
        store.close();
        List<String> files = names(dir);
        assertEquals(files.toString(), 3, files.size());   // the oldest deleted, no temporary files left
        assertTrue(files.toString(), files.get(2).matches("\\d{17}-shutdown\\.cfg") && files.get(0).endsWith("-snapshot.cfg"));
        Path latest = SnapshotStore.latest(dir);
        assertEquals(files.get(2), latest.getFileName().toString());
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(latest, StandardCharsets.UTF_8)) {
            p.load(r);
        }
        assertEquals("10", p.getProperty("job_queue_size"));
        ModelSnapshot back = ModelSnapshot.parse(p.getProperty("model_snapshot"));
        assertEquals(files.get(2), back.name());
        assertEquals(models.versions(), back.versions());
    }

    @Test
    public void latestIgnoresOtherFiles() throws Exception {
        Path dir = tmp.newFolder("config").toPath();
        Files.writeString(dir.resolve("20240101000000000-startup.cfg"), "");
        Files.writeString(dir.resolve("20250101000000000-snapshot.cfg"), "");
        Files.writeString(dir.resolve("99999999999999999-notes.txt"), "");
        Files.writeString(dir.resolve(".30000101000000000-snapshot.cfg.tmp"), "");
        assertEquals("20250101000000000-snapshot.cfg", SnapshotStore.latest(dir).getFileName().toString());
    }

    @Test
    public void directoryFollowsLogLocation() {
        assertEquals(Path.of("/var/log/ts", "config"), SnapshotStore.directory(Map.of("LOG_LOCATION", "/var/log/ts")));
        assertTrue(SnapshotStore.directory(Map.of()).endsWith(Path.of("logs", "config")));
    }
}
