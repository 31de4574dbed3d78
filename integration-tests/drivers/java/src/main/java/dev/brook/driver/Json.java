/*
 * JSON output of the driver: one shared Jackson mapper, documents printed to stdout one per
 * line (the driver protocol's "JSON lines"), flushed at once so that a reader sees each
 * record as soon as it is printed. Nothing else in the driver writes to stdout.
 */
package dev.brook.driver;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

final class Json {
    static final ObjectMapper MAPPER = new ObjectMapper();
    private static final PrintStream OUT = new PrintStream(
            new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);

    private Json() {}

    static ObjectNode object() {
        return MAPPER.createObjectNode();
    }

    static ArrayNode array() {
        return MAPPER.createArrayNode();
    }

    static ObjectNode ok() {
        return object().put("ok", true);
    }

    /** Prints one compact JSON document on its own line and flushes. */
    static void println(Object document) throws JsonProcessingException {
        OUT.println(MAPPER.writeValueAsString(document));
        OUT.flush();
    }
}
