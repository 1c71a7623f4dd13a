package org.tserve.config;

import static org.junit.Assert.assertEquals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import org.junit.Test;

/** ts/generated/ is what PythonKeys writes from today's ModelKeys and ConfigKeys. */
public class PythonKeysTest {
    private static Path repo(String path) {
        return Paths.get(System.getProperty("tserve.repo", "../"), path);
    }

    @Test
    public void generatedPythonMatchesTheDeclarations() throws Exception {
        for (Map.Entry<String, String> f : PythonKeys.files().entrySet()) {
            String committed = new String(Files.readAllBytes(repo(f.getKey())), StandardCharsets.UTF_8);
            assertEquals(f.getKey() + " is out of date: run `gradle --no-daemon -q pythonKeys`", f.getValue(), committed);
        }
    }

    @Test
    public void pythonStringLiteralsEscapeQuotesBackslashesAndControlCharacters() {
        assertEquals("\"a\\\"b\\\\c\\x0ad\"", PythonKeys.string("a\"b\\c\nd"));
        assertEquals("\"≥ 1\"", PythonKeys.string("≥ 1"));
    }
}
