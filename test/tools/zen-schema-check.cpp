//===- zen-schema-check.cpp - validate a JSON file against a JSON Schema ---===//
//
// Usage: zen-schema-check SCHEMA.json DOCUMENT.json
// Exit 0 when the document conforms; otherwise prints every violation and
// exits 1. Uses valijson (draft 7) over nlohmann::json.
//
//===----------------------------------------------------------------------===//
#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include <fstream>
#include <iostream>

static bool readJson(const char *path, nlohmann::json &out) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << path << ": cannot read\n";
    return false;
  }
  try {
    out = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception &error) {
    std::cerr << path << ": " << error.what() << "\n";
    return false;
  }
  return true;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: zen-schema-check SCHEMA.json DOCUMENT.json\n";
    return 2;
  }
  nlohmann::json schemaJson, document;
  if (!readJson(argv[1], schemaJson) || !readJson(argv[2], document))
    return 2;
  valijson::Schema schema;
  valijson::SchemaParser parser;
  valijson::adapters::NlohmannJsonAdapter schemaAdapter(schemaJson);
  parser.populateSchema(schemaAdapter, schema);
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter documentAdapter(document);
  if (validator.validate(schema, documentAdapter, &results)) {
    std::cout << argv[2] << ": conforms to " << argv[1] << "\n";
    return 0;
  }
  valijson::ValidationResults::Error error;
  while (results.popError(error)) {
    std::string path;
    for (const std::string &part : error.context)
      path += part;
    std::cerr << argv[2] << ": " << path << ": " << error.description << "\n";
  }
  return 1;
}
