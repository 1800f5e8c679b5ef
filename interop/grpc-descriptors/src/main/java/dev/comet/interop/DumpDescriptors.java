package dev.comet.interop;

import com.google.protobuf.DescriptorProtos.DescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumDescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumValueDescriptorProto;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.MethodDescriptorProto;
import com.google.protobuf.DescriptorProtos.ServiceDescriptorProto;
import com.google.protobuf.Descriptors.FileDescriptor;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Prints the messages, enums and services of the descriptors embedded in rocketmq-proto's
 * generated classes as one JSON object with sorted keys. The example dump_descriptors of the crate
 * comet-grpc-proto prints Comet's FileDescriptorSet in the same shape, and compare.py diffs the two.
 */
public final class DumpDescriptors {
    private DumpDescriptors() {
    }

    public static void main(String[] args) {
        FileDescriptor[] files = {
            apache.rocketmq.v2.MQDomain.getDescriptor(),
            apache.rocketmq.v2.MQService.getDescriptor(),
            apache.rocketmq.v2.MQAdmin.getDescriptor(),
        };
        Map<String, Object> messages = new TreeMap<>();
        Map<String, Object> enums = new TreeMap<>();
        Map<String, Object> services = new TreeMap<>();
        for (FileDescriptor file : files) {
            FileDescriptorProto proto = file.toProto();
            String prefix = proto.getPackage();
            for (DescriptorProto message : proto.getMessageTypeList()) {
                addMessage(prefix, message, messages, enums);
            }
            for (EnumDescriptorProto e : proto.getEnumTypeList()) {
                addEnum(prefix, e, enums);
            }
            for (ServiceDescriptorProto service : proto.getServiceList()) {
                Map<String, Object> methods = new TreeMap<>();
                for (MethodDescriptorProto m : service.getMethodList()) {
                    Map<String, Object> method = new TreeMap<>();
                    method.put("input", strip(m.getInputType()));
                    method.put("output", strip(m.getOutputType()));
                    method.put("client_streaming", m.getClientStreaming());
                    method.put("server_streaming", m.getServerStreaming());
                    methods.put(m.getName(), method);
                }
                services.put(prefix + "." + service.getName(), methods);
            }
        }
        Map<String, Object> root = new TreeMap<>();
        root.put("messages", messages);
        root.put("enums", enums);
        root.put("services", services);
        StringBuilder out = new StringBuilder();
        write(root, out);
        System.out.println(out);
    }

    private static void addMessage(String prefix, DescriptorProto message,
            Map<String, Object> messages, Map<String, Object> enums) {
        String name = prefix + "." + message.getName();
        Map<String, Object> fields = new TreeMap<>();
        for (FieldDescriptorProto f : message.getFieldList()) {
            Map<String, Object> field = new TreeMap<>();
            field.put("number", f.getNumber());
            field.put("type", f.getType().name());
            field.put("label", f.getLabel().name());
            field.put("proto3_optional", f.getProto3Optional());
            field.put("type_name", strip(f.getTypeName()));
            field.put("oneof", f.hasOneofIndex()
                ? message.getOneofDecl(f.getOneofIndex()).getName() : "");
            fields.put(f.getName(), field);
        }
        Map<String, Object> entry = new TreeMap<>();
        entry.put("fields", fields);
        entry.put("map_entry", message.getOptions().getMapEntry());
        messages.put(name, entry);
        for (DescriptorProto nested : message.getNestedTypeList()) {
            addMessage(name, nested, messages, enums);
        }
        for (EnumDescriptorProto e : message.getEnumTypeList()) {
            addEnum(name, e, enums);
        }
    }

    private static void addEnum(String prefix, EnumDescriptorProto e, Map<String, Object> enums) {
        Map<String, Object> values = new TreeMap<>();
        for (EnumValueDescriptorProto v : e.getValueList()) {
            values.put(v.getName(), v.getNumber());
        }
        enums.put(prefix + "." + e.getName(), values);
    }

    private static String strip(String typeName) {
        return typeName.startsWith(".") ? typeName.substring(1) : typeName;
    }

    @SuppressWarnings("unchecked")
    private static void write(Object value, StringBuilder out) {
        if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) value).entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                writeString(e.getKey(), out);
                out.append(':');
                write(e.getValue(), out);
            }
            out.append('}');
        } else if (value instanceof String) {
            writeString((String) value, out);
        } else {
            out.append(value);
        }
    }

    private static void writeString(String s, StringBuilder out) {
        out.append('"');
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\');
            }
            out.append(c);
        }
        out.append('"');
    }
}
