package org.tserve.config;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

/**
 * The key declarations and what documents them agree: docs/configuration.md's generated tables
 * and the sample config.properties name only declared keys, and every declared key has a doc line.
 * Also pins the messages of the declared value checks.
 */
public class ConfigKeysDocTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private static Path repo(String path) {
        return Paths.get(System.getProperty("tserve.repo", "../"), path);
    }

    @Test
    public void configurationPageMatchesTheDeclarations() throws Exception {
        String page = new String(Files.readAllBytes(repo("docs/configuration.md")), StandardCharsets.UTF_8);
        assertEquals("docs/configuration.md is out of date: run `gradle --no-daemon -q configDocs`",
                KeyDocs.tables(), KeyDocs.generatedPart(page));
    }

    @Test
    public void everyDeclaredKeyHasADocLine() {
        for (ConfigKeys.Key k : ConfigKeys.all().values()) {
            assertFalse("config.properties key " + k.name + " has no doc line in ConfigKeys", k.doc.isBlank());
        }
    }

    @Test
    public void sampleConfigPropertiesNamesOnlyDeclaredKeys() throws Exception {
        Pattern assignment = Pattern.compile("^#?([a-z][a-z0-9_]*)=", Pattern.MULTILINE);
        String text = new String(Files.readAllBytes(repo("config.properties")), StandardCharsets.UTF_8);
        Matcher m = assignment.matcher(text);
        List<String> seen = new ArrayList<>();
        while (m.find()) {
            assertTrue("config.properties sets " + m.group(1) + ", which ConfigKeys does not declare",
                    ConfigKeys.get(m.group(1)) != null);
            seen.add(m.group(1));
        }
        assertTrue("the pattern found the keys", seen.contains("inference_address") && seen.contains("model_store"));
    }

    private String refusal(String props) throws Exception {
        File f = tmp.newFile();
        Files.write(f.toPath(), props.getBytes(StandardCharsets.UTF_8));
        try {
            new ConfigManager(Arguments.parse(new String[] {"-f", f.getPath()}), new HashMap<>());
        } catch (ConfigException e) {
            return e.getMessage();
        }
        throw new AssertionError(props + " was accepted");
    }

    @Test
    public void declaredChecksNameTheKey() throws Exception {
        assertEquals("Configuration key 'job_queue_size' must be a positive integer, got 0", refusal("job_queue_size=0"));
        assertEquals("Configuration key 'max_workers' must not be negative, got -1", refusal("max_workers=-1"));
        assertEquals("Configuration key 'max_archive_entries' must not be negative (0 = no limit), got -2",
                refusal("max_archive_entries=-2"));
        assertEquals("Configuration key 'max_config_snapshots' must be at least 1, got 0",
                refusal("max_config_snapshots=0"));
        assertEquals("Configuration key 'worker_socket_type' must be unix or tcp, got udp",
                refusal("worker_socket_type=udp"));
        assertEquals("Configuration key 'metrics_mode' must be log, prometheus or legacy, got csv",
                refusal("metrics_mode=csv"));
        assertEquals("Configuration key 'metrics_address' = ftp://x:1 is not an address of the form http://host:port "
                + "or https://host:port", refusal("metrics_address=ftp://x:1"));
        assertTrue(refusal("allowed_urls=file://.*,(").startsWith("Invalid regular expression '(' in allowed_urls: "));
        assertEquals("Invalid value 'x' for configuration key 'max_workers' (from config file): expected an integer",
                refusal("max_workers=x"));
    }
}
