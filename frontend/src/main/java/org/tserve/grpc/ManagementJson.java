package org.tserve.grpc;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonArray;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.tserve.api.DescribeJson;
import org.tserve.wlm.api.ModelDescription;
import org.tserve.wlm.api.ModelList;

/**
 * The JSON text the REST management API answers for describe and list (its own
 * {@link DescribeJson} shapes, pretty-printed with a trailing newline), used as
 * {@code ManagementResponse.msg} so gRPC and REST clients read the same document.
 */
final class ManagementJson {
    private static final Gson PRETTY = new GsonBuilder().setPrettyPrinting().disableHtmlEscaping().create();

    private ManagementJson() {
    }

    static String list(ModelList l) {
        return PRETTY.toJson(DescribeJson.list(l)) + "\n";
    }

    /** {@code customized}: the handler's describe answer for the first entry, or null. */
    static String describe(List<ModelDescription> ds, String customized) {
        JsonArray arr = new JsonArray();
        for (int i = 0; i < ds.size(); i++) {
            byte[] c = i == 0 && customized != null ? customized.getBytes(StandardCharsets.UTF_8) : null;
            arr.add(DescribeJson.model(ds.get(i), c));
        }
        return PRETTY.toJson(arr) + "\n";
    }
}
