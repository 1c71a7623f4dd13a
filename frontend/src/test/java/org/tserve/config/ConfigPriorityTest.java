package org.tserve.config;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.registry.SettingsResolver;

public class ConfigPriorityTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private ConfigManager load(String props, Map<String, String> env, String... args) throws Exception {
        File f = tmp.newFile();
        Files.write(f.toPath(), props.getBytes(StandardCharsets.UTF_8));
        List<String> a = new ArrayList<>(List.of("-f", f.getPath()));
        a.addAll(List.of(args));
        return new ConfigManager(Arguments.parse(a.toArray(new String[0])), env);
    }

    private ConfigManager load(String props) throws Exception {
        return load(props, new HashMap<>());
    }

    @Test
    public void startupModelsAreSplitOnCommasFromEitherSourceAsTorchServesAre() throws Exception {
        // TorchServe joins the launcher's --models into load_models and splits that on commas:
        // `torchserve --models a.mar,b.mar` (its own test_torch_compile) starts two models
        assertEquals(List.of("a.mar", "n=b.mar", "c.mar"),
                load("", new HashMap<>(), "-m", "a.mar, n=b.mar", "-m", "c.mar").getStartupModels());
        assertEquals(List.of("a.mar", "b.mar"), load("load_models=a.mar,,b.mar\n").getStartupModels());
    }

    @Test
    public void defaultsAreTorchServes() throws Exception {
        ConfigManager c = load("");
        assertEquals("127.0.0.1", c.address("inference_address").host);
        assertEquals(8080, c.address("inference_address").port);
        assertEquals(8081, c.address("management_address").port);
        assertEquals(8082, c.address("metrics_address").port);
        assertEquals(100, c.getInt("job_queue_size"));
        assertEquals(120, c.getInt("default_response_timeout"));
        assertEquals(6553500, c.getInt("max_request_size"));
        assertEquals(9000, c.getInt("initial_worker_port"));
        assertEquals(7070, c.getInt("grpc_inference_port"));
        assertEquals(7071, c.getInt("grpc_management_port"));
        assertTrue(c.isTokenAuthEnabled());
        assertTrue(!c.isModelApiEnabled());
    }

    @Test
    public void aValueCarryingAnInlineCommentIsWarnedAboutByKeyWithoutTheValue() throws Exception {
        ConfigManager c = load("cluster_key=s3cret   # optional: shared secret\ncluster_address=10.0.0.1\n"
                + "# a comment line\nallowed_urls=file://.*#frag\n");
        List<String> w = c.getWarnings().stream().filter(x -> x.contains("inline comment")).toList();
        assertEquals(w.toString(), 1, w.size());
        assertTrue(w.get(0), w.get(0).contains("'cluster_key'") && w.get(0).contains("(# optional: shared secret)"));
        assertTrue(w.get(0), !w.get(0).contains("s3cret"));
        assertEquals("s3cret   # optional: shared secret", c.get("cluster_key"));   // what .properties gives
    }

    @Test
    public void layersApplyInOrderPropertiesYamlApi() throws Exception {
        ConfigManager c = load("default_response_timeout=50\ndefault_startup_timeout=60\njob_queue_size=7\n"
                + "models={\"m\": {\"1.0\": {\"batchSize\": 2, \"maxBatchDelay\": 11, \"responseTimeout\": 51, \"minWorkers\": 3, \"maxWorkers\": 3}}}\n");
        List<String> warnings = new ArrayList<>();
        // properties + models JSON only
        org.tserve.config.ModelSettings s = SettingsResolver.resolve(c, "m", "1.0", Map.of(), null, 1, warnings);
        assertEquals(2, s.batchSize);
        assertEquals(11, s.maxBatchDelay);
        assertEquals(51, s.responseTimeout);
        assertEquals(60, s.startupTimeout);
        assertEquals(7, s.jobQueueSize);
        assertEquals(3, s.minWorkers);
        // yaml beats properties
        Map<String, Object> yaml = new LinkedHashMap<>();
        yaml.put("batchSize", 4);
        yaml.put("responseTimeout", 52);
        yaml.put("minWorkers", 2);
        yaml.put("maxWorkers", 4);
        yaml.put("jobQueueSize", 9);
        s = SettingsResolver.resolve(c, "m", "1.0", yaml, null, 1, warnings);
        assertEquals(4, s.batchSize);
        assertEquals(11, s.maxBatchDelay);
        assertEquals(52, s.responseTimeout);
        assertEquals(60, s.startupTimeout);
        assertEquals(2, s.minWorkers);
        assertEquals(4, s.maxWorkers);
        assertEquals(9, s.jobQueueSize);
        // API beats yaml (unlike TorchServe, where yaml timeouts win over API parameters)
        RegisterRequest r = new RegisterRequest("m.mar");
        r.setting("batchSize", 8);
        r.setting("responseTimeout", 53);
        r.initialWorkers = 1;
        s = SettingsResolver.resolve(c, "m", "1.0", yaml, r, 1, warnings);
        assertEquals(8, s.batchSize);
        assertEquals(53, s.responseTimeout);
        assertEquals(1, s.minWorkers);
        assertEquals(4, s.maxWorkers);
        assertEquals(60, s.startupTimeout);
        assertTrue(warnings.toString(), warnings.isEmpty());
    }

    @Test
    public void yamlWithoutTimeoutsKeepsConfigDefaults() throws Exception {
        ConfigManager c = load("default_response_timeout=33\n");
        ModelSettings s = SettingsResolver.resolve(c, "m", "1.0", Map.of("batchSize", 2), null, 1, new ArrayList<>());
        assertEquals(33, s.responseTimeout);
    }

    @Test
    public void illTypedYamlKeyIsAnErrorNamingIt() throws Exception {
        ConfigManager c = load("");
        try {
            SettingsResolver.resolve(c, "m", "1.0", Map.of("batchSize", "four"), null, 1, new ArrayList<>());
            fail("expected ConfigException");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("batchSize") && e.getMessage().contains("integer"));
        }
        try {
            SettingsResolver.resolve(c, "m", "1.0", Map.of("minWorkers", 3, "maxWorkers", 1), null, 1, new ArrayList<>());
            fail("expected ConfigException");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("maxWorkers"));
        }
    }

    @Test
    public void unknownYamlKeysWarnAndHandlerSectionsPassSilently() throws Exception {
        ConfigManager c = load("");
        List<String> warnings = new ArrayList<>();
        Map<String, Object> yaml = new LinkedHashMap<>();
        yaml.put("handler", Map.of("model_path", "x"));
        yaml.put("batchSzie", 2);
        yaml.put("useVenv", true);
        SettingsResolver.resolve(c, "m", "1.0", yaml, null, 1, warnings);
        assertEquals(warnings.toString(), 1, warnings.size());
        assertTrue(warnings.get(0).contains("batchSzie"));
    }

    @Test
    public void illTypedPropertyIsAnErrorNamingIt() throws Exception {
        try {
            load("job_queue_size=lots\n");
            fail("expected ConfigException");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("job_queue_size"));
        }
        try {
            load("enable_model_api=yes\n");
            fail("expected ConfigException");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("enable_model_api"));
        }
        try {
            load("inference_address=localhost:8080\n");
            fail("expected ConfigException");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("inference_address"));
        }
    }

    @Test
    public void unknownPropertyWarns() throws Exception {
        ConfigManager c = load("inferense_address=http://127.0.0.1:1\n");
        assertEquals(1, c.getWarnings().size());
        assertTrue(c.getWarnings().get(0).contains("inferense_address"));
    }

    @Test
    public void envVarsOverrideOnlyWhenEnabled() throws Exception {
        Map<String, String> env = new HashMap<>();
        env.put("TS_JOB_QUEUE_SIZE", "42");
        assertEquals(100, load("", env).getInt("job_queue_size"));
        assertEquals(42, load("enable_envvars_config=true\n", env).getInt("job_queue_size"));
        env.put("TS_JOB_QUEUE_SIZE", "x");
        try {
            load("enable_envvars_config=true\n", env);
            fail("expected ConfigException");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("TS_JOB_QUEUE_SIZE"));
        }
    }

    @Test
    public void cliBeatsFileAndEnvReferencesAreReplaced() throws Exception {
        Map<String, String> env = new HashMap<>();
        env.put("MY_STORE", "/srv/models");
        ConfigManager c = load("model_store=$$MY_STORE$$\n", env, "-dt", "-mapi", "--python", "/usr/bin/python9");
        assertEquals("/srv/models", c.getModelStore());
        assertTrue(!c.isTokenAuthEnabled());
        assertTrue(c.isModelApiEnabled());
        assertEquals("/usr/bin/python9", c.getPython());
        c = load("model_store=/a\n", env, "-s", "/b", "-m", "x=x.mar", "y.mar");
        assertEquals("/b", c.getModelStore());
        assertEquals(List.of("x=x.mar", "y.mar"), c.getStartupModels());
    }

    @Test
    public void unknownOptionIsAnError() {
        try {
            Arguments.parse(new String[] {"--bogus"});
            fail("expected ConfigException");
        } catch (ConfigException e) {
            assertTrue(e.getMessage().contains("--bogus"));
        }
    }
}
